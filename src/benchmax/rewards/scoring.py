"""benchmax 0.2.x's module path ``benchmax.rewards.scoring``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.rewards._adaptive import RubricCache, generate_and_cache_adaptive_rubrics  # noqa: F401
from benchmax.rewards._evaluate import RubricEvaluation, evaluate_rubric_ranking, evaluate_single_rubric  # noqa: F401
from benchmax.rewards._judge import Judge  # noqa: F401
from benchmax.rewards._rubric import Rubric  # noqa: F401
from benchmax.rewards._scoring import rank_group_rubrics, rubric_reward_key, score_group_rubrics, score_rubrics
from benchmax.rewards._text import extract_completion_text  # noqa: F401

__all__ = ["rank_group_rubrics", "rubric_reward_key", "score_group_rubrics", "score_rubrics"]
