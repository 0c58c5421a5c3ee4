"""benchmax 0.2.x's module path ``benchmax.rewards.adaptive``: its names, from where they live now."""

from benchmax.rewards._adaptive import (
    AdaptiveRubrics,
    RubricCache,
    generate_adaptive_rubrics,
    generate_and_cache_adaptive_rubrics,
    prompt_key,
)

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.rewards._evaluate import evaluate_single_rubric  # noqa: F401
from benchmax.rewards._judge import Judge, JudgeError  # noqa: F401
from benchmax.rewards._prompts import build_adaptive_rubric_prompt  # noqa: F401
from benchmax.rewards._rubric import Rubric  # noqa: F401

__all__ = [
    "AdaptiveRubrics",
    "RubricCache",
    "generate_adaptive_rubrics",
    "generate_and_cache_adaptive_rubrics",
    "prompt_key",
]
