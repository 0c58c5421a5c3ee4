"""benchmax 0.2.x's module path ``benchmax.rewards.rubric``: its names, from where they live now."""

from benchmax.rewards._adaptive import RubricPolarity
from benchmax.rewards._evaluate import (
    RankingAnchor,
    RubricEvaluation,
    RubricRanking,
    evaluate_rubric_ranking,
    evaluate_single_rubric,
)

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.rewards._judge import Judge, JudgeError  # noqa: F401
from benchmax.rewards._prompts import build_rubric_evaluation_prompt, build_rubric_ranking_prompt  # noqa: F401
from benchmax.rewards._rubric import Rubric

__all__ = [
    "RankingAnchor",
    "Rubric",
    "RubricEvaluation",
    "RubricPolarity",
    "RubricRanking",
    "evaluate_rubric_ranking",
    "evaluate_single_rubric",
]
