"""benchmax 0.2.x's module path ``benchmax.rewards.adaptive``: its names, from where they live now."""

from benchmax.rewards._adaptive import (
    AdaptiveRubrics,
    RubricCache,
    generate_adaptive_rubrics,
    generate_and_cache_adaptive_rubrics,
    prompt_key,
)

__all__ = [
    "AdaptiveRubrics",
    "RubricCache",
    "generate_adaptive_rubrics",
    "generate_and_cache_adaptive_rubrics",
    "prompt_key",
]
