"""benchmax 0.2.x's module path ``benchmax.rewards.prompts``: its names, from where they live now."""

from benchmax.rewards._prompts import (
    build_adaptive_rubric_prompt,
    build_diversity_prompt,
    build_rubric_evaluation_prompt,
    build_rubric_ranking_prompt,
)

__all__ = [
    "build_adaptive_rubric_prompt",
    "build_diversity_prompt",
    "build_rubric_evaluation_prompt",
    "build_rubric_ranking_prompt",
]
