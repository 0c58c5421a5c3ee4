"""benchmax 0.2.x's module path ``benchmax.rewards.rubric``: its names, from where they live now."""

from benchmax.rewards._adaptive import RubricPolarity
from benchmax.rewards._evaluate import (
    RankingAnchor,
    RubricEvaluation,
    RubricRanking,
    evaluate_rubric_ranking,
    evaluate_single_rubric,
)
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
