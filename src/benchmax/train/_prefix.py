"""Prompts that share tokens run them once: the prefill the sampler and the loss share.

Every sibling of a GRPO group has the same prompt, and a system prompt (tools,
worked examples) opens every prompt of an env. transformers' ``generate`` and
TRL's loss run all of it once per row. Here the tokens all prompts share run
once, the rest of each distinct prompt once, and the key/value cache goes to
every row that has that prompt: the same computation (with gradients, the
prompt's gradient is the sum over its rows), a fraction of the cost when
prompts are long next to what is generated.

:func:`prefill` serves both sides: the sampler prefills whole prompts and reads
the last position's logits; the loss (:func:`prefix_logps`) prefills each
prompt but its last token and runs that token and the completion on top,
through TRL's fused LM head, so only completion positions reach the head.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

SAVING = 0.9
"""The loss takes the shared path when it runs at most this share of the positions TRL's pass
runs (three smaller passes instead of one cost a little of what they save)."""


def common_prefix(rows: Sequence[Sequence[int]]) -> int:
    """How many leading tokens all ``rows`` share."""
    first = rows[0]
    length = min(len(row) for row in rows)
    for row in rows[1:]:
        index = 0
        while index < length and row[index] == first[index]:
            index += 1
        length = index
    return length


def cache_argument(model: Any) -> str:
    """transformers 5.x renames ``past_key_values`` to ``cache``; use whichever the model takes."""
    name = getattr(model, "_benchmax_cache_argument", None)
    if name is None:
        name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        with contextlib.suppress(AttributeError):
            model._benchmax_cache_argument = name
    return name


def cache_of(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any], Any]
"""One cached pass: ``(ids, attention mask, position ids, cache or None) -> model output``."""


@dataclass(frozen=True, slots=True)
class Prefilled:
    """Distinct prompts run through the model, one cache row each."""

    output: Any
    """The last pass's output (its logits, where the pass computes them, are the prompts' last positions')."""
    cache: Any
    mask: torch.Tensor
    """(prompts, cached width): which cached positions are tokens (left padding inside is 0)."""
    positions: torch.Tensor
    """(prompts,): the position of each prompt's last token."""


def prefill(forward: Forward, prompts: Sequence[Sequence[int]], *, device: Any) -> Prefilled:
    """Run distinct, non-empty ``prompts``: their common prefix once, then each prompt's tail.

    Tails are left-padded; positions count only tokens, so a row sees exactly its own prompt.
    """
    shared = min(common_prefix(prompts), min(len(prompt) for prompt in prompts) - 1)
    cache = None
    if shared > 0:
        prefix = torch.tensor([list(prompts[0][:shared])], device=device)
        cache = cache_of(forward(prefix, torch.ones_like(prefix), torch.arange(shared, device=device)[None], None))
        if len(prompts) > 1:
            cache.batch_repeat_interleave(len(prompts))
    tails = [prompt[shared:] for prompt in prompts]
    width = max(len(tail) for tail in tails)
    ids = torch.zeros((len(tails), width), dtype=torch.long, device=device)
    tail_mask = torch.zeros((len(tails), width), dtype=torch.long, device=device)
    for row, tail in enumerate(tails):
        ids[row, width - len(tail) :] = torch.tensor(list(tail), device=device)
        tail_mask[row, width - len(tail) :] = 1
    mask = torch.cat([torch.ones((len(tails), shared), dtype=torch.long, device=device), tail_mask], dim=1)
    positions = (shared + tail_mask.cumsum(1) - 1).clamp(min=0)
    output = forward(ids, mask, positions, cache)
    return Prefilled(output, cache_of(output), mask, positions[:, -1])


def prefix_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    saving: float = SAVING,
) -> tuple[torch.Tensor, torch.Tensor | None, None] | None:
    """TRL's per-token logprobs (and entropies) of the completion tokens, each distinct prompt run once.

    ``input_ids`` is TRL's layout: left-padded prompts, then right-padded
    completions (``logits_to_keep`` wide). Each distinct prompt but its last
    token is prefilled (:func:`prefill`, through the backbone); each row then
    runs its prompt's last token and its completion on that cache, through TRL's
    fused LM head (``fused_lm_head=True``, which applies TRL's temperature).
    Returns ``None`` (TRL's own pass should run) when that would not run at most
    ``saving`` of the positions TRL's pass runs, or the model is not a decoder
    this is known to be exact for (a backbone, an LM head, full attention in
    every layer, no activation checkpointing).
    """
    from transformers import DynamicCache

    prompt_width = input_ids.size(1) - logits_to_keep
    backbone = getattr(model, "base_model", None)
    if prompt_width <= 0 or backbone is None or backbone is model or not hasattr(model, "get_output_embeddings"):
        return None
    if any(getattr(module, "gradient_checkpointing", False) is True for module in model.modules()):
        return None  # checkpointed layers run without a cache
    layer_types = getattr(getattr(model, "config", None), "layer_types", None) or ()
    if any(kind != "full_attention" for kind in layer_types):
        return None  # a sliding window would see the cache differently
    prompt_mask = attention_mask[:, :prompt_width]
    if not bool(prompt_mask[:, -1].all()) or bool((prompt_mask[:, 1:] < prompt_mask[:, :-1]).any()):
        return None  # not left-padded prompts, or a row without a prompt token
    # rows with one prompt are one row of the padded block (the padding is the batch's, not the row's)
    distinct, inverse = torch.unique(
        input_ids[:, :prompt_width].masked_fill(prompt_mask == 0, -1), dim=0, return_inverse=True
    )
    unique = [tuple(token for token in row if token >= 0) for row in distinct.tolist()]
    heads = [prompt[:-1] for prompt in unique]
    if not all(heads):
        return None
    shared = min(common_prefix(heads), min(len(head) for head in heads) - 1)
    tails = max(len(head) for head in heads) - shared
    rows = input_ids.size(0)
    cost = shared + len(heads) * tails + rows * (1 + logits_to_keep)
    if cost > saving * rows * input_ids.size(1):
        return None
    device = input_ids.device
    name = cache_argument(backbone)

    def forward(ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> Any:
        return backbone(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **{name: cache})

    prompts = prefill(forward, heads, device=device)
    layers = [(layer.keys, layer.values) for layer in prompts.cache.layers]
    index = inverse.to(device)
    last = torch.tensor([prompt[-1] for prompt in unique], device=device)[index]
    completion_mask = attention_mask[:, prompt_width:]
    rest_ids = torch.cat([last[:, None], input_ids[:, prompt_width:]], dim=1)
    rest_mask = torch.cat([torch.ones_like(completion_mask[:, :1]), completion_mask], dim=1)
    positions = prompts.positions[index][:, None] + rest_mask.cumsum(dim=1)
    labels = rest_ids.masked_fill(rest_mask == 0, -100)
    labels[:, 0] = -100
    cached_mask = prompts.mask[index]
    size = batch_size or rows
    all_logps, all_entropies = [], []
    for start in range(0, rows, size):
        chunk = slice(start, min(start + size, rows))
        selected = index[chunk]
        cache = DynamicCache(
            ddp_cache_data=[
                (keys.index_select(0, selected), values.index_select(0, selected)) for keys, values in layers
            ]
        )
        outputs = model(
            input_ids=rest_ids[chunk],
            attention_mask=torch.cat([cached_mask[chunk], rest_mask[chunk]], dim=1),
            position_ids=positions[chunk],
            labels=labels[chunk],
            fused_lm_head=True,
            **{cache_argument(model): cache},
        )
        all_logps.append(outputs.log_probs[:, -logits_to_keep:])
        if compute_entropy:
            all_entropies.append(outputs.entropy[:, -logits_to_keep:])
    logps = torch.cat(all_logps, dim=0)
    entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
    return logps, entropies, None
