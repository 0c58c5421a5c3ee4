"""TRL's ``GRPOTrainer`` with the off-policy correction async generation needs.

With ``async_steps=K`` a step trains on rollouts sampled by weights up to K
updates old. The rollouts carry the logprobs they were sampled with (TRL
receives them as ``sampling_per_token_logps``), so each token's loss is
weighted by the truncated importance ratio ``min(pi_theta / pi_sampler, C)``,
the correction TRL applies to vLLM rollouts (``vllm_importance_sampling_*``,
here in ``token_truncate`` mode by default, C = 3.0).

TRL applies that correction only when vLLM generates, and computes it from an
extra forward pass. With one optimisation pass per batch (``num_iterations=1``)
``pi_theta`` at the loss is the current model, so here the ratio comes from the
loss's own forward pass (detached) and is folded into the per-token advantages:
for the clipped objectives ``min(r A w, clip(r) A w) = w min(r A, clip(r) A)``
for ``w > 0``, the same loss TRL builds for vLLM, without the extra pass.

Whatever generates, the step logs the ratio (``is_ratio/*``), the share of
tokens truncated and ``kl/sampler``, the k3 estimate of KL(pi_sampler || pi_theta):
about 0 for synchronous in-process generation (the token check of the
logprobs), growing with staleness.

The rollouts of a step share most of their prompt (a system prompt, tools,
worked examples): TRL's forward pass runs it once per rollout. Here the tokens
every sequence starts with run once (with gradients) and their keys and values
are shared by all rows, the same computation with the prefix's gradient summed
over the rows, so a step costs the prefix once plus each rollout's own tokens.
"""

from __future__ import annotations

import math
from typing import Any

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


def trainer_class() -> type:
    """The trainer class (built lazily: importing TRL loads torch and transformers)."""
    from trl import GRPOTrainer

    from benchmax.train._rows import add_sequence_rows

    class BenchmaxGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
        """``GRPOTrainer`` plus the off-policy weights of in-process generation and their metrics."""

        benchmax_correct = True
        """Apply the importance weights (in-process generation with one pass per batch;
        TRL does it itself for vLLM)."""

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            output = super()._generate_and_score_completions(inputs)
            batch = getattr(self.rollout_func, "last", None)
            if batch is None or not any(batch.extra):
                return output
            if [item.get("rollout_id") for item in inputs] != [outcome.rollout_id for outcome in batch.outcomes]:
                raise RuntimeError("the scored batch is not the rollout bridge's last batch")
            return add_sequence_rows(self, output, batch.extra)

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            self._benchmax_inputs = inputs
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._benchmax_inputs = None

        def _get_per_token_logps_and_entropies(self, model: Any, *args: Any, **kwargs: Any) -> Any:
            result = self._benchmax_shared(model, *args, **kwargs)
            if result is None:
                result = super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
            inputs = getattr(self, "_benchmax_inputs", None)
            if inputs is not None and kwargs.get("compute_entropy"):
                # the loss's own forward pass: the first call inside _compute_loss
                self._benchmax_inputs = None
                self._benchmax_weigh(inputs, result[0])
            return result

        def _benchmax_shared(
            self,
            model: Any,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            logits_to_keep: int,
            batch_size: int | None = None,
            compute_entropy: bool = False,
            compute_aux_loss: bool = False,
            **extra: Any,
        ) -> tuple[torch.Tensor, torch.Tensor | None, None] | None:
            """The shared-prefix forward pass, or ``None`` where TRL's own must run
            (multimodal inputs, MoE aux loss, no prefix worth sharing)."""
            if compute_aux_loss or any(value is not None for value in extra.values()):
                return None
            return shared_prefix_logps(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
            )

        def _benchmax_weigh(self, inputs: dict[str, Any], logps: torch.Tensor) -> None:
            sampling = inputs.get("sampling_per_token_logps")
            if sampling is None:
                return
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            mask = mask.to(logps.dtype)
            log_ratio = logps.detach() - sampling
            known = mask.bool() & ~torch.isnan(sampling)
            mode = "train" if self.model.training else "eval"
            if known.any():
                values = log_ratio[known]
                ratio = torch.exp(values)
                cap = self.args.vllm_importance_sampling_clip_max
                metrics = self._metrics[mode]
                metrics["is_ratio/mean"].append(ratio.mean().item())
                metrics["is_ratio/min"].append(ratio.min().item())
                metrics["is_ratio/max"].append(ratio.max().item())
                if cap is not None:
                    metrics["is_ratio/truncated"].append((ratio > cap).float().mean().item())
                metrics["kl/sampler"].append((torch.expm1(values) - values).mean().item())
                metrics["tokens/logprob_diff_max"].append(values.abs().max().item())
            if not self.benchmax_correct or getattr(self, "use_vllm", False):
                return
            weights = importance_weights(
                log_ratio,
                mask,
                mode=self.args.vllm_importance_sampling_mode,
                cap=self.args.vllm_importance_sampling_clip_max,
                floor=self.args.vllm_importance_sampling_clip_min,
            )
            # weigh the advantages as generated, however often TRL hands this batch over
            advantages = inputs.setdefault("benchmax_advantages", inputs["advantages"])
            if advantages.dim() == 1:
                advantages = advantages.unsqueeze(1)
            inputs["advantages"] = advantages * weights

    return BenchmaxGRPOTrainer


MIN_SHARED = 16
"""Tokens every sequence must share for the shared-prefix pass to be used."""


def shared_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int) -> int:
    """How many tokens every left-padded prompt starts with (at most its length minus one,
    so each row keeps a token of its own to predict its first completion token from)."""
    pads = (attention_mask[:, :prompt_width] == 0).sum(dim=1).tolist()
    lengths = [prompt_width - pad for pad in pads]
    limit = min(lengths) - 1
    if limit <= 0:
        return 0
    rows = [input_ids[row, pad : pad + limit] for row, pad in enumerate(pads)]
    stacked = torch.stack(rows)
    same = (stacked == stacked[0]).all(dim=0)
    differing = (~same).nonzero()
    return int(differing[0]) if len(differing) else limit


def shared_prefix_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    min_shared: int = MIN_SHARED,
) -> tuple[torch.Tensor, torch.Tensor | None, None] | None:
    """TRL's per-token logprobs (and entropies) of the completion tokens, with the
    prefix all prompts share computed once.

    ``input_ids`` is TRL's layout: left-padded prompts, then right-padded
    completions (``logits_to_keep`` wide). The shared prefix runs through the
    backbone once, its cache is expanded to every row, and each row's own tokens
    (the rest of its prompt, its completion) run on top, through TRL's fused LM
    head (``fused_lm_head=True``, which applies TRL's temperature). Position ids
    continue the prefix, so each row sees exactly its own sequence. Returns
    ``None`` when fewer than ``min_shared`` tokens are shared or the model is not
    a decoder this works on.
    """
    from transformers import DynamicCache

    from benchmax.train._sampling import cache_argument, cache_of

    prompt_width = input_ids.size(1) - logits_to_keep
    backbone = getattr(model, "base_model", None)
    if prompt_width <= 0 or backbone is None or backbone is model or not hasattr(model, "get_output_embeddings"):
        return None
    shared = shared_prefix(input_ids, attention_mask, prompt_width)
    if shared < min_shared:
        return None
    pads = (attention_mask[:, :prompt_width] == 0).sum(dim=1).tolist()
    prefix = input_ids[:1, pads[0] : pads[0] + shared]
    device = input_ids.device
    out = backbone(
        input_ids=prefix,
        attention_mask=torch.ones_like(prefix),
        position_ids=torch.arange(shared, device=device)[None],
        use_cache=True,
    )
    prefix_cache = cache_of(out)
    layers = [(layer.keys, layer.values) for layer in prefix_cache.layers]
    keep = [
        torch.cat([input_ids[row, :pad], input_ids[row, pad + shared :]]) for row, pad in enumerate(pads)
    ]
    rest_ids = torch.stack(keep)
    rest_mask = torch.stack(
        [torch.cat([attention_mask[row, :pad], attention_mask[row, pad + shared :]]) for row, pad in enumerate(pads)]
    )
    positions = (shared + rest_mask.cumsum(dim=1) - 1).clamp(min=0)
    labels = rest_ids.masked_fill(rest_mask == 0, -100)
    labels[:, :-logits_to_keep] = -100
    name = cache_argument(model)
    size = batch_size or rest_ids.size(0)
    all_logps, all_entropies = [], []
    for start in range(0, rest_ids.size(0), size):
        end = min(start + size, rest_ids.size(0))
        rows = end - start
        cache = DynamicCache(
            ddp_cache_data=[(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1)) for keys, values in layers]
        )
        mask = torch.cat(
            [torch.ones((rows, shared), dtype=rest_mask.dtype, device=device), rest_mask[start:end]], dim=1
        )
        outputs = model(
            input_ids=rest_ids[start:end],
            attention_mask=mask,
            position_ids=positions[start:end],
            labels=labels[start:end],
            fused_lm_head=True,
            **{name: cache},
        )
        all_logps.append(outputs.log_probs[:, -logits_to_keep:])
        if compute_entropy:
            all_entropies.append(outputs.entropy[:, -logits_to_keep:])
    logps = torch.cat(all_logps, dim=0)
    entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
    return logps, entropies, None
