"""Sampling a batch of completions from a transformers model, token by token, with a KV cache.

What a generation backend is asked (:class:`GenerationRequest`) and gives back
(:class:`Generation`), and :func:`sample`, the in-process backend: the prefix a batch's
prompts share runs through the model once, each token's logprob is kept for the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from benchmax.train._prefix import cache_argument, cache_of, prefill


@dataclass(frozen=True, slots=True)
class Generation:
    """One completion as a backend produced it."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finished: bool
    """True when the model ended its turn (an end token), False at the token limit."""
    version: int | None = None
    """The policy version whose weights generated it, when the backend knows."""


@dataclass(slots=True)
class GenerationRequest:
    """One turn waiting for a backend: its prompt ids and sampling settings."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float


def _forward(model: Any, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> Any:
    """One cached forward pass, only the last position's logits kept."""
    return model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
        **{cache_argument(model): cache},
    )


@torch.no_grad()
def sample(model: Any, items: Sequence[GenerationRequest], *, eos_ids: Sequence[int]) -> list[Generation]:
    """Sample a batch of turns with their prompts' shared tokens computed once.

    The turns of a step share most of their prompt: every sibling of a group
    has the same first turn, and a system prompt (tools, worked examples) opens
    every prompt of an env. ``generate`` would run all of it once per row; here
    the prefix all prompts share runs once, the rest of each distinct prompt
    once, and the cache is copied to the rows that need it. Logprobs are the
    log-softmax of the logits over the temperature, the quantity TRL
    recomputes; top-p only narrows what is drawn. Temperature 0 is greedy.
    Rows leave the batch as they finish. A batch holds one sampling setting
    (the policy's ``Batcher`` groups turns by it).
    """
    device = next(model.parameters()).device
    unique: dict[tuple[int, ...], int] = {}
    rows = [unique.setdefault(tuple(item.prompt_ids), len(unique)) for item in items]
    prompts = prefill(partial(_forward, model), list(unique), device=device)
    cache = prompts.cache
    index = torch.tensor(rows, device=device)
    if len(unique) != len(items) or rows != list(range(len(items))):
        cache.batch_select_indices(index)
    logits = prompts.output.logits[:, -1, :][index].float()
    mask = prompts.mask[index]
    last = prompts.positions[index]

    eos = set(int(token) for token in eos_ids)
    active = list(range(len(items)))
    generated: list[list[int]] = [[] for _ in items]
    logprobs: list[list[float]] = [[] for _ in items]
    finished = [False] * len(items)
    temperature, top_p = items[0].temperature, items[0].top_p
    while active:
        drawn, drawn_logprobs = _draw(logits, temperature, top_p)
        tokens = drawn.tolist()
        for slot, row in enumerate(active):
            generated[row].append(tokens[slot])
            logprobs[row].append(float(drawn_logprobs[slot]))
            if tokens[slot] in eos:
                finished[row] = True
        keep = [
            slot
            for slot, row in enumerate(active)
            if not finished[row] and len(generated[row]) < items[row].max_tokens
        ]
        if not keep:
            break
        if len(keep) != len(active):
            selected = torch.tensor(keep, device=device)
            cache.batch_select_indices(selected)
            mask, last = mask[selected], last[selected]
            tokens = [tokens[slot] for slot in keep]
            active = [active[slot] for slot in keep]
        mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long, device=device)], dim=1)
        last = last + 1
        output = _forward(model, torch.tensor(tokens, device=device)[:, None], mask, last[:, None], cache)
        cache = cache_of(output)
        logits = output.logits[:, -1, :].float()
    return [Generation(tuple(generated[row]), tuple(logprobs[row]), finished[row]) for row in range(len(items))]


def _draw(logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of logits, and its logprob under the tempered softmax."""
    if temperature <= 0:
        tokens = torch.argmax(logits, dim=-1)
        return tokens, torch.log_softmax(logits, dim=-1).gather(-1, tokens[:, None]).squeeze(-1)
    scores = torch.log_softmax(logits / temperature, dim=-1)
    probs = scores.exp()
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True, dim=-1)
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p
        choice = torch.multinomial(sorted_probs.masked_fill(outside, 0.0), 1)
        tokens = order.gather(-1, choice).squeeze(-1)
    else:
        tokens = torch.multinomial(probs, 1).squeeze(-1)
    return tokens, scores.gather(-1, tokens[:, None]).squeeze(-1)
