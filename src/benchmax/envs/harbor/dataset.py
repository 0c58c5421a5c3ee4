"""benchmax 0.2.x's module path ``benchmax.envs.harbor.dataset``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.envs.dataset import Dataset, validate_max_examples  # noqa: F401
from benchmax.envs.harbor._dataset import HarborDataset
from benchmax.envs.harbor._deps import require_harbor  # noqa: F401
from benchmax.envs.shared_types import Example  # noqa: F401

__all__ = ["HarborDataset"]
