"""benchmax 0.2.x's module path ``benchmax.rewards.judge``: its names, from where they live now."""

from benchmax.rewards._judge import Judge, JudgeError

__all__ = ["Judge", "JudgeError"]
