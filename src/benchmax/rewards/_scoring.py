"""Rubric scores as reward dicts: for one rollout, a sibling group, or a ranked group.

Every rubric becomes a component named by :func:`rubric_reward_key`, so the
dicts drop straight into what ``compute_reward``/``compute_group_rewards``
return. An empty answer scores 0.0 on every rubric without a judge call.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchmax.rewards._adaptive import RubricCache, generate_and_cache_adaptive_rubrics
from benchmax.rewards._deterministic import Completion
from benchmax.rewards._evaluate import RubricEvaluation, evaluate_rubric_ranking, evaluate_single_rubric
from benchmax.rewards._judge import Judge
from benchmax.rewards._rubric import Rubric
from benchmax.rewards._text import extract_completion_text

logger = logging.getLogger("benchmax.rewards.rubric")

_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def rubric_reward_key(rubric: Rubric) -> str:
    """The component name of a rubric: ``rubric_`` plus its title in lower snake case."""
    slug = _NOT_SLUG.sub("_", rubric.title.lower()).strip("_")
    if not slug:
        raise ValueError(f"rubric title {rubric.title!r} needs at least one letter or digit to name its reward")
    return f"rubric_{slug}"


def _reference(ground_truth: Any) -> str | None:
    return str(ground_truth) if ground_truth is not None else None


async def score_rubrics(
    rollout_id: str,
    completion: Completion,
    *,
    ground_truth: Any,
    rubrics: Sequence[Rubric],
    question: str,
    judge: Judge,
) -> dict[str, float]:
    """Score one answer on every rubric (concurrently): ``{rubric_key: reward in [0, 1]}``."""
    _check_rubrics(rubrics, allow_none=False)
    if not isinstance(rollout_id, str) or not rollout_id.strip():
        raise ValueError("rollout_id must be non-empty")
    text = extract_completion_text(completion)
    if not text:
        logger.info("rubric.scored rollout_id=%s empty_completion=true", rollout_id)
        return {rubric_reward_key(rubric): 0.0 for rubric in rubrics}
    evaluations = await asyncio.gather(
        *(
            evaluate_single_rubric(
                rubric,
                question=question,
                response=text,
                ground_truth=_reference(ground_truth),
                judge=judge,
                log_result=False,
            )
            for rubric in rubrics
        )
    )
    rewards = {
        rubric_reward_key(rubric): rubric.reward_for(evaluation.score)
        for rubric, evaluation in zip(rubrics, evaluations, strict=True)
    }
    logger.info("rubric.scored rollout_id=%s rewards=%s", rollout_id, rewards)
    return rewards


async def score_group_rubrics(
    rollout_ids: Sequence[str],
    completions: Sequence[Completion],
    *,
    ground_truth: Any,
    question: str,
    judge: Judge,
    rubrics: Sequence[Rubric] = (),
    use_adaptive: bool = False,
    existing_rubrics: Sequence[Rubric] = (),
    cache: RubricCache | None = None,
) -> list[dict[str, float]]:
    """Score each sibling on every rubric, in rollout order.

    With ``use_adaptive`` the judge also writes rubrics that tell these
    siblings apart (kept in ``cache`` when they do); their mean reward becomes
    the ``rubric_adaptive`` component (0.0 when none applies).
    """
    _check_group(rollout_ids, completions)
    _check_rubrics(rubrics, allow_none=use_adaptive)
    texts = [extract_completion_text(completion) for completion in completions]
    rewards = [{rubric_reward_key(rubric): 0.0 for rubric in rubrics} for _ in completions]
    await _fill(rewards, texts, rubrics, question, judge, _reference(ground_truth), _store_per_rubric)
    if use_adaptive:
        adaptive = await generate_and_cache_adaptive_rubrics(
            question=question,
            ground_truth=_reference(ground_truth) or "",
            responses=texts,
            judge=judge,
            cache=cache if cache is not None else RubricCache(),
            existing_rubrics=existing_rubrics,
        )
        sums = [[0.0, 0] for _ in completions]
        await _fill(sums, texts, adaptive.all, question, judge, _reference(ground_truth) or "", _add_to_mean)
        for reward, (total, count) in zip(rewards, sums, strict=True):
            reward["rubric_adaptive"] = total / count if count else 0.0
    for rollout_id, reward in zip(rollout_ids, rewards, strict=True):
        logger.info("rubric.scored rollout_id=%s rewards=%s", rollout_id, reward)
    return rewards


def _store_per_rubric(target: dict[str, float], rubric: Rubric, evaluation: RubricEvaluation) -> None:
    target[rubric_reward_key(rubric)] = rubric.reward_for(evaluation.score)


def _add_to_mean(target: list[Any], rubric: Rubric, evaluation: RubricEvaluation) -> None:
    target[0] += rubric.reward_for(evaluation.score)
    target[1] += 1


async def _fill(
    targets: list[Any],
    texts: Sequence[str],
    rubrics: Sequence[Rubric],
    question: str,
    judge: Judge,
    reference: str | None,
    record: Callable[[Any, Rubric, RubricEvaluation], None],
) -> None:
    """Evaluate every non-empty text on every rubric concurrently; ``record`` folds each result in."""
    jobs: list[tuple[int, Rubric, Awaitable[RubricEvaluation]]] = [
        (
            index,
            rubric,
            evaluate_single_rubric(
                rubric, question=question, response=text, ground_truth=reference, judge=judge, log_result=False
            ),
        )
        for index, text in enumerate(texts)
        if text
        for rubric in rubrics
    ]
    if not jobs:
        return
    results = await asyncio.gather(*(job for _, _, job in jobs))
    for (index, rubric, _), evaluation in zip(jobs, results, strict=True):
        record(targets[index], rubric, evaluation)


async def rank_group_rubrics(
    rollout_ids: Sequence[str],
    completions: Sequence[Completion],
    *,
    ground_truth: Any,
    question: str,
    judge: Judge,
    rubrics: Sequence[Rubric],
    include_ground_truth: bool = True,
) -> list[dict[str, float]]:
    """Rank the siblings once per rubric; each sibling's place becomes its reward (see ``evaluate_rubric_ranking``)."""
    _check_group(rollout_ids, completions)
    _check_rubrics(rubrics, allow_none=False)
    texts = [extract_completion_text(completion) for completion in completions]
    reference = str(ground_truth).strip() if include_ground_truth and ground_truth is not None else ""
    rankings = await asyncio.gather(
        *(
            evaluate_rubric_ranking(
                rubric,
                question=question,
                responses=texts,
                ground_truth=reference or None,
                judge=judge,
                log_result=False,
            )
            for rubric in rubrics
        )
    )
    rewards: list[dict[str, float]] = [{} for _ in completions]
    for rubric, ranking in zip(rubrics, rankings, strict=True):
        key = rubric_reward_key(rubric)
        for reward, score in zip(rewards, ranking.scores, strict=True):
            reward[key] = score
    for rollout_id, reward in zip(rollout_ids, rewards, strict=True):
        logger.info("rubric.ranked rollout_id=%s rewards=%s", rollout_id, reward)
    return rewards


def _check_group(rollout_ids: Sequence[str], completions: Sequence[Completion]) -> None:
    if len(rollout_ids) != len(completions):
        raise ValueError(f"got {len(rollout_ids)} rollout_ids for {len(completions)} completions; they must match")
    if not rollout_ids:
        raise ValueError("a rollout group must be non-empty")
    if any(not isinstance(rollout_id, str) or not rollout_id.strip() for rollout_id in rollout_ids):
        raise ValueError("rollout_ids must be non-empty strings")
    if len(set(rollout_ids)) != len(rollout_ids):
        raise ValueError("rollout_ids must be unique")


def _check_rubrics(rubrics: Sequence[Rubric], *, allow_none: bool) -> None:
    if not rubrics and not allow_none:
        raise ValueError("at least one rubric is required")
    keys = [rubric_reward_key(rubric) for rubric in rubrics]
    if len(set(keys)) != len(keys):
        raise ValueError(f"rubric titles must give distinct reward keys, got {keys}")
