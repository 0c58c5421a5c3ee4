"""One judge call per titled rubric: score a response, or rank a group and turn ranks into scores.

Ranking scores come from positions: tiers are listed best first and tied
items share the middle of the places their tier covers. Without references,
place 0 scores 1.0 and the last place 0.0. A ground truth ranked alongside the
responses anchors the scale at 0.5 (better than the reference climbs to 1.0,
worse falls from ``below_ground_truth_ceiling`` to 0.0). Anchors — reference
responses with known scores — do the same with several fixed points, scores
interpolated linearly between neighbouring anchors.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmax.rewards._judge import Judge, JudgeError
from benchmax.rewards._prompts import build_rubric_evaluation_prompt, build_rubric_ranking_prompt
from benchmax.rewards._rubric import Rubric

logger = logging.getLogger("benchmax.rewards.rubric")


@dataclass(frozen=True, slots=True)
class RankingAnchor:
    """A reference response whose score on the ranking's 0..1 scale is known."""

    response: str
    score: float
    label: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.response, str) or not self.response.strip():
            raise ValueError("ranking anchor response must be non-empty")
        if (
            isinstance(self.score, bool)
            or not isinstance(self.score, int | float)
            or not math.isfinite(float(self.score))
            or not 0 <= self.score <= 1
        ):
            raise ValueError(f"ranking anchor score must be within [0, 1], got {self.score!r}")
        if self.label is not None and (not isinstance(self.label, str) or not self.label.strip()):
            raise ValueError("ranking anchor label must be non-empty or None")


@dataclass(frozen=True, slots=True)
class RubricEvaluation:
    """A judge's raw score for one response (one of the rubric's allowed scores)."""

    score: float
    reasoning: str
    raw_response: str


@dataclass(frozen=True, slots=True)
class RubricRanking:
    """Per-response scores in input order (empty responses 0.0), and the judge's tiers.

    ``ranking`` indexes the items the judge saw: the non-empty responses in
    order, then the ground truth, then the anchors.
    """

    scores: tuple[float, ...]
    ranking: tuple[tuple[int, ...], ...]
    reasoning: str
    raw_response: str


async def evaluate_single_rubric(
    rubric: Rubric,
    *,
    question: str,
    response: str,
    judge: Judge,
    ground_truth: str | None = None,
    log_result: bool = True,
) -> RubricEvaluation:
    """Have ``judge`` score ``response`` on ``rubric``; any failure is a :class:`JudgeError`."""
    prompt = build_rubric_evaluation_prompt(rubric, question=question, response=response, ground_truth=ground_truth)
    try:
        payload, raw = await judge.request_json(prompt, request_id=f"rubric:{_slug(rubric.title)}")
        score = _allowed_score(payload, rubric)
        reasoning = _reasoning(payload)
    except Exception as error:
        logger.exception("rubric %r evaluation failed", rubric.title)
        raise JudgeError(f"rubric {rubric.title!r} evaluation failed: {error}") from error
    if log_result:
        logger.info(
            "rubric.evaluated title=%r polarity=%s score=%s reasoning=%s",
            rubric.title,
            rubric.polarity,
            score,
            reasoning,
        )
    return RubricEvaluation(score=score, reasoning=reasoning, raw_response=raw)


async def evaluate_rubric_ranking(
    rubric: Rubric,
    *,
    question: str,
    responses: Sequence[str],
    judge: Judge,
    ground_truth: str | None = None,
    anchors: Sequence[RankingAnchor] = (),
    below_ground_truth_ceiling: float = 0.3,
    log_result: bool = True,
) -> RubricRanking:
    """Rank ``responses`` on ``rubric`` in one judge call and score them by place (see module doc)."""
    if not 0 <= below_ground_truth_ceiling <= 1:
        raise ValueError(f"below_ground_truth_ceiling must be within [0, 1], got {below_ground_truth_ceiling!r}")
    anchors = tuple(anchors)
    if not all(isinstance(anchor, RankingAnchor) for anchor in anchors):
        raise TypeError("anchors must be RankingAnchor values")
    if any(earlier.score > later.score for earlier, later in itertools.pairwise(anchors)):
        raise ValueError("ranking anchors must be ordered from worst to best score")
    reference = ground_truth.strip() if ground_truth else ""
    if anchors and reference:
        raise ValueError("pass ground_truth or anchors, not both")

    scores = [0.0] * len(responses)
    judged = [(index, text.strip()) for index, text in enumerate(responses) if text and text.strip()]
    if not judged:
        return RubricRanking(tuple(scores), (), "All responses are empty", "")
    if len(judged) == 1 and not reference and not anchors:
        scores[judged[0][0]] = 1.0
        return RubricRanking(tuple(scores), ((0,),), "Only one non-empty response", "")

    items = [text for _, text in judged]
    reference_index = None
    if reference:
        reference_index = len(items)
        items.append(reference)
    anchor_indices = list(range(len(items), len(items) + len(anchors)))
    items.extend(anchor.response.strip() for anchor in anchors)

    prompt = build_rubric_ranking_prompt(rubric, question=question, responses=items)
    try:
        payload, raw = await judge.request_json(prompt, request_id=f"rubric-ranking:{_slug(rubric.title)}")
        ranking = _ranking(payload, len(items))
        places = _places(ranking)
        last = float(len(items) - 1)
        if anchors:
            points = sorted(zip([places[i] for i in anchor_indices], [a.score for a in anchors], strict=True))
            edges = _descending_edges(points)
            local = [_between_anchors(places[i], edges, last) for i in range(len(judged))]
        elif reference_index is not None:
            pivot = places[reference_index]
            local = [_around_reference(places[i], pivot, last, below_ground_truth_ceiling) for i in range(len(judged))]
        else:
            local = [1.0 - places[i] / last if last > 0 else 1.0 for i in range(len(judged))]
        reasoning = _reasoning(payload)
    except Exception as error:
        logger.exception("rubric %r ranking failed", rubric.title)
        raise JudgeError(f"rubric {rubric.title!r} ranking failed: {error}") from error

    for (original, _), value in zip(judged, local, strict=True):
        scores[original] = min(1.0, max(0.0, value))
    result = RubricRanking(tuple(scores), ranking, reasoning, raw)
    if log_result:
        logger.info(
            "rubric.ranked title=%r polarity=%s ranking=%s scores=%s anchors=%s reasoning=%s",
            rubric.title,
            rubric.polarity,
            result.ranking,
            result.scores,
            tuple((anchor.label or f"anchor@{anchor.score:g}", anchor.score) for anchor in anchors),
            result.reasoning,
        )
    return result


def _allowed_score(payload: Mapping[str, object], rubric: Rubric) -> float:
    score = payload.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise ValueError(f"the judge's reply needs a numeric 'score', got {score!r}")
    value = float(score)
    if not math.isfinite(value):
        raise ValueError("the judge's score must be finite")
    if value not in rubric.allowed_scores:
        raise ValueError(f"judge score {score!r} is not one of {list(rubric.allowed_scores)}")
    return value


def _reasoning(payload: Mapping[str, object]) -> str:
    reasoning = payload.get("reasoning", "")
    if not isinstance(reasoning, str):
        raise ValueError("the judge's 'reasoning' must be a string when given")
    return reasoning


def _ranking(payload: Mapping[str, object], count: int) -> tuple[tuple[int, ...], ...]:
    tiers = payload.get("ranking")
    if not isinstance(tiers, list) or not tiers:
        raise ValueError("the judge's reply needs a non-empty 'ranking' list of tiers")
    seen: set[int] = set()
    result: list[tuple[int, ...]] = []
    for tier in tiers:
        if not isinstance(tier, list) or not tier:
            raise ValueError("each ranking tier must be a non-empty list of indices")
        for index in tier:
            if isinstance(index, bool) or not isinstance(index, int):
                raise ValueError(f"ranking indices must be integers, got {index!r}")
            if not 0 <= index < count:
                raise ValueError(f"ranking index {index} is outside 0..{count - 1}")
            if index in seen:
                raise ValueError(f"ranking repeats index {index}")
            seen.add(index)
        result.append(tuple(tier))
    missing = sorted(set(range(count)) - seen)
    if missing:
        raise ValueError(f"ranking leaves out indices {missing}")
    return tuple(result)


def _places(ranking: Sequence[Sequence[int]]) -> dict[int, float]:
    """Each item's 0-based place; a tier of k items starting at place p puts them all at p + (k-1)/2."""
    places: dict[int, float] = {}
    start = 0
    for tier in ranking:
        middle = start + (len(tier) - 1) / 2
        for index in tier:
            places[index] = middle
        start += len(tier)
    return places


def _descending_edges(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Anchor (place, score) points, best place first, merged until scores never rise with place.

    An anchor placed worse than one with a lower score contradicts the scale;
    the pair collapses to the better place with the higher score.
    """
    edges: list[tuple[float, float]] = []
    for place, score in points:
        while edges and score > edges[-1][1]:
            merged_place, merged_score = edges.pop()
            place, score = merged_place, max(merged_score, score)
        edges.append((place, score))
    return edges


def _between_anchors(place: float, edges: Sequence[tuple[float, float]], last: float) -> float:
    top_place, top_score = edges[0]
    bottom_place, bottom_score = edges[-1]
    if place <= top_place:
        if top_place == 0:
            return top_score
        return top_score + (1 - top_score) * (top_place - place) / top_place
    if place >= bottom_place:
        room = last - bottom_place
        return bottom_score * (last - place) / room if room > 0 else 0.0
    for (left_place, left_score), (right_place, right_score) in itertools.pairwise(edges):
        if left_place <= place <= right_place:
            width = right_place - left_place
            if width == 0:
                return max(left_score, right_score)
            return right_score + (left_score - right_score) * (right_place - place) / width
    raise RuntimeError(f"place {place} fell outside the anchors {list(edges)}")


def _around_reference(place: float, pivot: float, last: float, ceiling: float) -> float:
    if place < pivot:
        return 0.5 + 0.5 * (pivot - place) / pivot
    if place == pivot:
        return 0.5
    room = last - pivot
    if room <= 0:
        return ceiling
    return ceiling * (1 - (place - pivot) / room)


def _slug(title: str) -> str:
    return "-".join(title.lower().split())
