"""benchmax 0.2.x's module path ``benchmax.rewards.scoring``: its names, from where they live now."""

from benchmax.rewards._scoring import rank_group_rubrics, rubric_reward_key, score_group_rubrics, score_rubrics

__all__ = ["rank_group_rubrics", "rubric_reward_key", "score_group_rubrics", "score_rubrics"]
