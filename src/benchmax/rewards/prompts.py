"""benchmax 0.2.x's module path ``benchmax.rewards.prompts``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.rewards._prompts import (  # noqa: F401
    DEFAULT_DIVERSITY_INSTRUCTIONS,
    build_adaptive_rubric_prompt,
    build_diversity_prompt,
    build_rubric_evaluation_prompt,
    build_rubric_ranking_prompt,
    format_rubrics,
)

__all__ = [
    "build_adaptive_rubric_prompt",
    "build_diversity_prompt",
    "build_rubric_evaluation_prompt",
    "build_rubric_ranking_prompt",
]
