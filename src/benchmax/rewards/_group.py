"""Group-relative rewards for ``compute_group_rewards``: ranking, win rates, diversity, normalising.

Siblings answer the same prompt, so they can be scored against each other: a
judge's pairwise win rate or listwise rank, or a penalty for answers that are
near-copies of one another. Each helper takes and returns plain lists in the
rollouts' order; :func:`per_rollout` turns a list into the dict the hook returns.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from benchmax.envs import BaseRollout
    from benchmax.rewards._judge import Judge, Prompt

_WORD = re.compile(r"\w+")

NormalizeMethod = Literal["zscore", "center", "minmax", "rank"]


def per_rollout(rollouts: Sequence[BaseRollout], **components: Sequence[float]) -> dict[str, dict[str, float]]:
    """``{rollout_id: {name: value}}`` from lists in rollout order: the hook's return value.

    ``per_rollout(rollouts, win_rate=rates)`` → ``{"r1": {"win_rate": 0.75}, ...}``.
    """
    for name, values in components.items():
        if len(values) != len(rollouts):
            raise ValueError(f"{name!r} has {len(values)} values for {len(rollouts)} rollouts")
    return {
        rollout.rollout_id: {name: float(values[index]) for name, values in components.items()}
        for index, rollout in enumerate(rollouts)
    }


def scores_to_ranks(scores: Sequence[float], *, higher_is_better: bool = True) -> list[float]:
    """0-based ranks (0 = best); tied scores share the average of their ranks."""
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=higher_is_better)
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2
        start = end + 1
    return ranks


def rank_to_reward(ranks: Sequence[float], *, best: float = 1.0, worst: float = 0.0) -> list[float]:
    """Map 0-based ranks (0 = best, fractional for ties) linearly onto ``best``..``worst``.

    A group of one gets ``best``. The scale is fixed by the group size, so the
    same rank means the same reward in every group of that size.
    """
    count = len(ranks)
    if count == 1:
        return [best]
    for rank in ranks:
        if not 0 <= rank <= count - 1:
            raise ValueError(f"rank {rank!r} is outside 0..{count - 1} for a group of {count}")
    return [best + (worst - best) * rank / (count - 1) for rank in ranks]


def order_to_ranks(order: Sequence[int]) -> list[float]:
    """Invert a best-first ordering of indices (as :meth:`Judge.rank` returns) into ranks."""
    ranks = [0.0] * len(order)
    for rank, index in enumerate(order):
        ranks[index] = float(rank)
    return ranks


async def pairwise_win_rates(
    judge: Judge,
    responses: Sequence[str],
    *,
    prompt: Prompt = "",
    criteria: str = "",
    both_orders: bool = True,
    max_concurrency: int = 16,
) -> list[float]:
    """Each response's share of wins against its siblings (ties count half).

    Every pair is judged, in both orders when ``both_orders`` (judges favour
    one position; asking twice cancels that). That is n(n-1) calls for n
    responses: 56 for a group of 8.
    """
    count = len(responses)
    if count < 2:
        return [0.5] * count
    games = [(i, j) for i, j in itertools.permutations(range(count), 2) if both_orders or i < j]
    limit = asyncio.Semaphore(max_concurrency)

    async def play(i: int, j: int) -> float:
        async with limit:
            return await judge.compare(responses[i], responses[j], prompt=prompt, criteria=criteria)

    results = await asyncio.gather(*(play(i, j) for i, j in games))
    wins = [0.0] * count
    played = [0] * count
    for (i, j), first_wins in zip(games, results, strict=True):
        wins[i] += first_wins
        wins[j] += 1.0 - first_wins
        played[i] += 1
        played[j] += 1
    return [wins[index] / played[index] for index in range(count)]


async def listwise_rank_rewards(
    judge: Judge,
    responses: Sequence[str],
    *,
    prompt: Prompt = "",
    criteria: str = "",
    best: float = 1.0,
    worst: float = 0.0,
) -> list[float]:
    """One judge call ranks the whole group; ranks map onto ``best``..``worst``."""
    order = await judge.rank(responses, prompt=prompt, criteria=criteria)
    return rank_to_reward(order_to_ranks(order), best=best, worst=worst)


def _ngrams(text: str, n: int) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(text.casefold())
    if len(words) < n:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def ngram_clusters(texts: Sequence[str], *, n: int = 3, threshold: float = 0.6) -> list[int]:
    """Cluster labels: texts whose word n-gram Jaccard similarity reaches ``threshold``
    share a cluster (single link, so near-copies chain together).

    Labels are the index of each cluster's first member. O(n²) in the group
    size; for large groups call it through :func:`~benchmax.rewards.run_sync`.
    """
    grams = [_ngrams(text, n) for text in texts]
    parent = list(range(len(texts)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for i, j in itertools.combinations(range(len(texts)), 2):
        union = grams[i] | grams[j]
        similarity = len(grams[i] & grams[j]) / len(union) if union else 1.0
        if similarity >= threshold:
            a, b = root(i), root(j)
            parent[max(a, b)] = min(a, b)
    return [root(index) for index in range(len(texts))]


def diversity_scale(
    rewards: Sequence[float], texts: Sequence[str], *, n: int = 3, threshold: float = 0.6
) -> list[float]:
    """Divide each positive reward by the size of its n-gram cluster.

    Five copies of one good answer share its credit; a distinct good answer
    keeps all of it. Zero and negative rewards pass unchanged (dividing a
    penalty would reward copying bad answers).
    """
    if len(rewards) != len(texts):
        raise ValueError(f"{len(rewards)} rewards for {len(texts)} texts")
    labels = ngram_clusters(texts, n=n, threshold=threshold)
    sizes = {label: labels.count(label) for label in labels}
    return [
        reward / sizes[label] if reward > 0 else float(reward) for reward, label in zip(rewards, labels, strict=True)
    ]


def normalize_group(values: Sequence[float], *, method: NormalizeMethod = "zscore", eps: float = 1e-6) -> list[float]:
    """Group-relative values: ``zscore`` (GRPO's advantage), ``center`` (minus the mean),
    ``minmax`` (to 0..1) or ``rank`` (:func:`rank_to_reward` of the values).

    A group with no spread (all equal, or std below ``eps``) gives zeros for
    ``zscore``/``center`` and 0.5 for ``minmax``/``rank``: nothing to prefer.
    """
    if not values:
        return []
    data = [float(value) for value in values]
    if method == "rank":
        return rank_to_reward(scores_to_ranks(data))
    mean = statistics.fmean(data)
    if method == "center":
        return [value - mean for value in data]
    if method == "zscore":
        spread = statistics.pstdev(data)
        return [0.0 if spread < eps else (value - mean) / spread for value in data]
    if method == "minmax":
        low, high = min(data), max(data)
        return [0.5 if high - low < eps else (value - low) / (high - low) for value in data]
    raise ValueError(f"unknown method {method!r}; use 'zscore', 'center', 'minmax' or 'rank'")
