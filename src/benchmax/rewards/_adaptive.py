"""Adaptive rubrics: the judge writes criteria for one question, and a cache keeps the ones that discriminate.

A generated rubric is worth keeping only if it scores the sibling responses
differently; the cache ranks candidates by the spread (population standard
deviation) of their scores and keeps the top few per polarity and question.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmax.rewards._evaluate import evaluate_single_rubric
from benchmax.rewards._judge import Judge, JudgeError
from benchmax.rewards._prompts import build_adaptive_rubric_prompt
from benchmax.rewards._rubric import Rubric, RubricPolarity

logger = logging.getLogger("benchmax.rewards.adaptive")


@dataclass(frozen=True, slots=True)
class AdaptiveRubrics:
    """The positive and negative rubrics chosen for one question, best first."""

    positive: tuple[Rubric, ...] = ()
    negative: tuple[Rubric, ...] = ()

    @property
    def all(self) -> tuple[Rubric, ...]:
        return self.positive + self.negative


class RubricCache:
    """Discriminative adaptive rubrics per question, in memory, for as long as the caller keeps it.

    Questions are stored by SHA-256 digest, not text. Within a question and
    polarity a rubric is identified by its title; a newer candidate with the
    same title replaces the older one.
    """

    def __init__(self, *, max_per_polarity: int = 3) -> None:
        if isinstance(max_per_polarity, bool) or not isinstance(max_per_polarity, int) or max_per_polarity < 1:
            raise ValueError(f"max_per_polarity must be a positive integer, got {max_per_polarity!r}")
        self.max_per_polarity = max_per_polarity
        self._kept: dict[str, dict[str, dict[str, tuple[Rubric, float]]]] = {}

    def get(self, prompt: str) -> AdaptiveRubrics:
        """The rubrics kept for ``prompt``, highest spread first (ties by title)."""
        entry = self._kept.get(prompt_key(prompt))
        if entry is None:
            return AdaptiveRubrics()
        return AdaptiveRubrics(positive=_best(entry["positive"]), negative=_best(entry["negative"]))

    def consider(self, prompt: str, rubric: Rubric, scores: Sequence[float]) -> bool:
        """Offer ``rubric`` with the raw scores it gave the siblings; whether it is kept.

        Fewer than two scores, or all equal, tell responses apart not at all:
        such a rubric is not kept.
        """
        values = tuple(float(score) for score in scores)
        if not all(math.isfinite(value) for value in values):
            raise ValueError("adaptive rubric scores must be finite")
        if len(values) < 2 or len(set(values)) < 2:
            return False
        entry = self._kept.setdefault(prompt_key(prompt), {"positive": {}, "negative": {}})
        candidates = entry[rubric.polarity]
        candidates[rubric.title] = (rubric, statistics.pstdev(values))
        keep = {kept.title for kept in _best(candidates)[: self.max_per_polarity]}
        for title in [title for title in candidates if title not in keep]:
            del candidates[title]
        return rubric.title in keep


def _best(candidates: Mapping[str, tuple[Rubric, float]]) -> tuple[Rubric, ...]:
    ordered = sorted(candidates.values(), key=lambda item: (-item[1], item[0].title))
    return tuple(rubric for rubric, _ in ordered)


def prompt_key(prompt: str) -> str:
    """The cache key of a prompt: its hash, so the cache never keeps the prompt text."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


async def generate_adaptive_rubrics(
    *,
    question: str,
    ground_truth: str,
    responses: Sequence[str],
    judge: Judge,
    existing_rubrics: Sequence[Rubric] = (),
) -> AdaptiveRubrics:
    """Ask ``judge`` for rubrics that separate ``responses``; a bad reply is a :class:`JudgeError`."""
    prompt = build_adaptive_rubric_prompt(
        question=question, ground_truth=ground_truth, responses=responses, existing_rubrics=existing_rubrics
    )
    try:
        payload, _ = await judge.request_json(prompt, request_id="adaptive-rubric-generation")
        generated = AdaptiveRubrics(
            positive=_parse(payload, "positive_rubrics", "positive"),
            negative=_parse(payload, "negative_rubrics", "negative"),
        )
    except JudgeError:
        raise
    except Exception as error:
        logger.exception("adaptive rubric generation failed")
        raise JudgeError(f"adaptive rubric generation failed: {error}") from error
    logger.info("adaptive_rubrics.generated positive=%d negative=%d", len(generated.positive), len(generated.negative))
    return generated


async def generate_and_cache_adaptive_rubrics(
    *,
    question: str,
    ground_truth: str,
    responses: Sequence[str],
    judge: Judge,
    cache: RubricCache,
    existing_rubrics: Sequence[Rubric] = (),
) -> AdaptiveRubrics:
    """Generate rubrics for the non-empty responses, keep the discriminating ones, return the cache's pick.

    With fewer than two non-empty responses nothing can be told apart, so the
    cache's current rubrics come back without a judge call.
    """
    answered = [response for response in responses if response.strip()]
    if len(answered) < 2:
        return cache.get(question)
    generated = await generate_adaptive_rubrics(
        question=question,
        ground_truth=ground_truth,
        responses=[response.strip() for response in answered],
        judge=judge,
        existing_rubrics=_union(existing_rubrics, cache.get(question).all),
    )
    for rubric in generated.all:
        evaluations = await asyncio.gather(
            *(
                evaluate_single_rubric(
                    rubric,
                    question=question,
                    response=response,
                    ground_truth=ground_truth,
                    judge=judge,
                    log_result=False,
                )
                for response in answered
            )
        )
        cache.consider(question, rubric, [evaluation.score for evaluation in evaluations])
    return cache.get(question)


def _union(*groups: Sequence[Rubric]) -> tuple[Rubric, ...]:
    merged: dict[tuple[str, str], Rubric] = {}
    for group in groups:
        for rubric in group:
            merged[(rubric.polarity, rubric.title)] = rubric
    return tuple(merged.values())


def _parse(payload: Mapping[str, object], key: str, polarity: RubricPolarity) -> tuple[Rubric, ...]:
    raw = payload.get(key, [])
    if not isinstance(raw, list):
        raise ValueError(f"the judge's {key!r} must be a list")
    rubrics = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValueError(f"the judge's {key}[{index}] must be an object")
        title, description = item.get("title"), item.get("description")
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"the judge's {key}[{index}].title must be non-empty")
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"the judge's {key}[{index}].description must be non-empty")
        rubrics.append(Rubric(title=title.strip(), description=description.strip(), polarity=polarity))
    return tuple(rubrics)
