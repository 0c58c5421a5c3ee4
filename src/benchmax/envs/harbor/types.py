"""benchmax 0.2.x's module path ``benchmax.envs.harbor.types``: its names, from where they live now."""

# 0.2.5 also exposed this name at this path (imported there); code may import it from it.
from benchmax.envs.harbor._bundled_agent import BundledHarborAgent  # noqa: F401
from benchmax.envs.harbor._types import HarborTrialTemplate

__all__ = ["HarborTrialTemplate"]
