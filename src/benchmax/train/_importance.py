"""The off-policy correction's weights: how much a token sampled by an older policy counts now.

One function, used where the loss is built (``_grpo``) and where a rollout's further sequences
get their rows (``_rows``), in TRL's vLLM modes (``vllm_importance_sampling_*``).
"""

from __future__ import annotations

import math

import torch

IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def importance_weights(
    log_ratio: torch.Tensor, mask: torch.Tensor, *, mode: str, cap: float | None, floor: float | None = None
) -> torch.Tensor:
    """TRL's vLLM importance weights from ``log pi_theta - log pi_sampler`` per token.

    ``*_truncate`` clamps the ratio to ``[floor, cap]``, ``*_mask`` zeroes it
    outside; ``sequence_*`` uses one ratio per sequence (the product over its
    tokens). NaN logprobs (unknown) count as ratio 1. Shape: (B, T) for token
    modes, (B, 1) for sequence modes.
    """
    if mode not in IS_MODES:
        raise ValueError(f"importance sampling mode must be one of {', '.join(IS_MODES)}, got {mode!r}")
    diff = torch.nan_to_num(log_ratio * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=floor, max=cap)
    low = floor if floor is not None else -math.inf
    high = cap if cap is not None else math.inf
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
