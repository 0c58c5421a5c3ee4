"""benchmax 0.2.x's module path ``benchmax.envs.harbor.env``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.auth import ModelRequestContext  # noqa: F401
from benchmax.envs.dataset import Dataset  # noqa: F401
from benchmax.envs.environment import Environment  # noqa: F401
from benchmax.envs.harbor._bundled_agent import BundledHarborAgent  # noqa: F401
from benchmax.envs.harbor._credentials import SandboxCredentials, sandbox_credentials_scope  # noqa: F401
from benchmax.envs.harbor._dataset import HarborDataset  # noqa: F401
from benchmax.envs.harbor._deps import require_harbor  # noqa: F401
from benchmax.envs.harbor._env import HarborEnv
from benchmax.envs.harbor._types import HarborTrialTemplate  # noqa: F401
from benchmax.envs.shared_types import (  # noqa: F401
    DatasetSplit,
    RolloutAttempt,
    RolloutOutcome,
    RolloutRequest,
    ValidationDiagnostic,
)

__all__ = ["HarborEnv"]
