"""Diversity-aware scaling: siblings that say the same thing share their reward.

Texts are clustered, offline by character n-gram overlap or by a judge that
groups them by approach, and every reward component of a text is divided by
the size of its cluster. Five copies of one answer then earn what one earns.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from benchmax.rewards._judge import Judge, JudgeError
from benchmax.rewards._prompts import DEFAULT_DIVERSITY_INSTRUCTIONS, build_diversity_prompt

logger = logging.getLogger("benchmax.rewards.diversity")


@dataclass(frozen=True, slots=True)
class NgramDiversityConfig:
    """Cluster offline: texts whose character ``n``-gram sets overlap (Jaccard) at least
    ``similarity_threshold`` join, transitively."""

    n: int = 3
    similarity_threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be positive, got {self.n!r}")
        if not 0 <= self.similarity_threshold <= 1:
            raise ValueError(f"similarity_threshold must be within [0, 1], got {self.similarity_threshold!r}")


@dataclass(frozen=True, slots=True)
class LLMDiversityConfig:
    """Cluster with ``judge``, by the approach each text takes (``instructions`` say how)."""

    judge: Judge
    instructions: str = DEFAULT_DIVERSITY_INSTRUCTIONS
    max_tokens: int = 512
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise ValueError("instructions must be non-empty")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens!r}")


DiversityConfig: TypeAlias = NgramDiversityConfig | LLMDiversityConfig


@dataclass(frozen=True, slots=True)
class ClusterResult:
    """One cluster id per text, and the divisor (its cluster's size) for each text's rewards."""

    cluster_ids: tuple[str, ...]
    divisors: tuple[float, ...]
    labels: tuple[str, ...] = ()
    raw_response: str | None = None

    @property
    def n_clusters(self) -> int:
        return len(set(self.cluster_ids))


async def cluster_texts(texts: Sequence[str], config: DiversityConfig, *, context: str = "") -> ClusterResult:
    """Cluster ``texts`` with the backend ``config`` chooses; a single text is its own cluster."""
    items = tuple(str(text) for text in texts)
    if not items:
        return ClusterResult(cluster_ids=(), divisors=())
    if len(items) == 1:
        return ClusterResult(cluster_ids=("0",), divisors=(1.0,))
    if isinstance(config, NgramDiversityConfig):
        return _by_ngrams(items, config)
    if isinstance(config, LLMDiversityConfig):
        return await _by_judge(items, config, context)
    raise TypeError(f"config must be NgramDiversityConfig or LLMDiversityConfig, got {type(config).__name__}")


async def scale_by_diversity(
    rewards: Sequence[Mapping[str, float]],
    texts: Sequence[str],
    config: DiversityConfig,
    *,
    context: str = "",
) -> tuple[list[dict[str, float]], ClusterResult]:
    """Each reward dict with every component divided by its text's cluster size, and the clustering."""
    if len(rewards) != len(texts):
        raise ValueError(
            f"rewards and texts must be the same length: got {len(rewards)} reward dicts for {len(texts)} texts"
        )
    clusters = await cluster_texts(texts, config, context=context)
    scaled = [
        {key: value / divisor for key, value in reward.items()}
        for reward, divisor in zip(rewards, clusters.divisors, strict=True)
    ]
    return scaled, clusters


def _by_ngrams(texts: tuple[str, ...], config: NgramDiversityConfig) -> ClusterResult:
    grams = [_char_ngrams(text, config.n) for text in texts]
    threshold = config.similarity_threshold
    linked = [
        [other for other in range(len(texts)) if other != index and _jaccard(grams[index], grams[other]) >= threshold]
        for index in range(len(texts))
    ]
    component = [-1] * len(texts)
    count = 0
    for start in range(len(texts)):
        if component[start] >= 0:
            continue
        component[start] = count
        stack = [start]
        while stack:
            for neighbour in linked[stack.pop()]:
                if component[neighbour] < 0:
                    component[neighbour] = count
                    stack.append(neighbour)
        count += 1
    ids = tuple(str(number) for number in component)
    sizes = Counter(ids)
    return ClusterResult(cluster_ids=ids, divisors=tuple(float(sizes[cluster]) for cluster in ids))


async def _by_judge(texts: tuple[str, ...], config: LLMDiversityConfig, context: str) -> ClusterResult:
    prompt = build_diversity_prompt(texts, context=context, instructions=config.instructions)
    try:
        payload, raw = await config.judge.request_json(
            prompt,
            request_id="diversity-clustering",
            temperature=config.temperature,
            max_tokens=config.max_tokens,
        )
        ids, labels = _assignments(payload, len(texts))
    except JudgeError:
        raise
    except Exception as error:
        logger.exception("LLM diversity clustering failed")
        raise JudgeError(f"diversity clustering failed: {error}") from error
    sizes = Counter(ids)
    return ClusterResult(
        cluster_ids=ids,
        divisors=tuple(float(sizes[cluster]) for cluster in ids),
        labels=labels,
        raw_response=raw,
    )


def _assignments(payload: Mapping[str, object], count: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    raw = payload.get("assignments")
    if not isinstance(raw, list):
        raise ValueError("the judge's 'assignments' must be a list")
    found: dict[int, tuple[str, str]] = {}
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError("each diversity assignment must be an object")
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"diversity assignment indices must be integers, got {index!r}")
        if not 0 <= index < count:
            raise ValueError(f"diversity assignment index {index} is outside 0..{count - 1}")
        if index in found:
            raise ValueError(f"diversity assignment repeats index {index}")
        cluster = item.get("cluster_id")
        if not isinstance(cluster, str) or not cluster.strip():
            raise ValueError(f"diversity assignment {index} needs a non-empty cluster_id")
        label = item.get("label", "")
        if not isinstance(label, str):
            raise ValueError(f"diversity assignment {index} label must be a string")
        found[index] = (cluster.strip(), label.strip())
    missing = sorted(set(range(count)) - found.keys())
    if missing:
        raise ValueError(f"diversity assignments leave out indices {missing}")
    return tuple(found[i][0] for i in range(count)), tuple(found[i][1] for i in range(count))


def _char_ngrams(text: str, n: int) -> frozenset[str]:
    clean = text.strip().lower()
    if len(clean) < n:
        return frozenset([clean]) if clean else frozenset()
    return frozenset(clean[i : i + n] for i in range(len(clean) - n + 1))


def _jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    if not left and not right:
        return 1.0
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)
