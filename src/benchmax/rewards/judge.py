"""benchmax 0.2.x's module path ``benchmax.rewards.judge``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.auth import ModelAuth, ModelRequestContext  # noqa: F401
from benchmax.envs import RolloutFailure  # noqa: F401
from benchmax.rewards._judge import Judge, JudgeError

__all__ = ["Judge", "JudgeError"]
