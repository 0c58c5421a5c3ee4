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

The rollouts of a step share most of their prompt (every sibling of a group
has the same one; a system prompt, tools and worked examples open all of them):
TRL's forward pass runs it once per rollout. Here each distinct prompt runs
once, with gradients, and its keys and values are shared by its rows
(:func:`benchmax.train._prefix.prefix_logps`): the same computation, the
prompt's gradient summed over its rows, so a step costs each prompt once plus
each rollout's own tokens.
"""

from __future__ import annotations

from typing import Any

import torch

from benchmax.train._importance import importance_weights
from benchmax.train._prefix import prefix_logps
from benchmax.train._rows import add_sequence_rows


def trainer_class() -> type:
    """The trainer class (built lazily: importing TRL loads torch and transformers)."""
    from trl import GRPOTrainer

    class BenchmaxGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
        """``GRPOTrainer`` plus the off-policy weights of in-process generation and their metrics."""

        benchmax_correct = True
        """Apply the importance weights (in-process generation with one pass per batch;
        TRL does it itself for vLLM)."""

        benchmax_credit = "outcome"
        """``outcome`` (TRL's GRPO advantages) or ``per_turn`` (see :mod:`benchmax.train._credit`)."""
        benchmax_turn_discount = 1.0
        benchmax_drop_unscorable = False

        # two steps of the trainer's, written below as functions of it
        _benchmax_turn_advantages = _turn_advantages
        _benchmax_weigh = _weigh

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            output = super()._generate_and_score_completions(inputs)
            batch = getattr(self.rollout_func, "last", None)
            per_turn = self.benchmax_credit == "per_turn" and self.model.training
            if batch is None or not (per_turn or any(batch.extra)):
                return output
            if [item.get("rollout_id") for item in inputs] != [outcome.rollout_id for outcome in batch.outcomes]:
                raise RuntimeError("the scored batch is not the rollout bridge's last batch")
            if per_turn:
                if any(batch.extra):
                    raise ValueError(
                        "credit='per_turn' needs one token sequence per rollout; an agent's rollouts with several "
                        "(sub-agents, summarised histories) train with credit='outcome'"
                    )
                output["advantages"] = self._benchmax_turn_advantages(batch, output["completion_ids"])
                return output
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
            """The forward pass with each distinct prompt run once, or ``None`` where TRL's own
            must run (multimodal inputs, MoE aux loss, too little shared to be worth it)."""
            if compute_aux_loss or any(value is not None for value in extra.values()):
                return None
            return prefix_logps(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
            )

    return BenchmaxGRPOTrainer


def _turn_advantages(trainer: Any, batch: Any, completion_ids: torch.Tensor) -> torch.Tensor:
    """Per-token advantages from per-turn returns, shaped like ``completion_ids``."""
    from benchmax.train._credit import token_advantages

    weights = [float(weight) for weight in trainer.reward_weights.tolist()]
    outcomes: list[float | None] = []
    for reward_map, outcome in zip(batch.rewards, batch.outcomes, strict=True):
        values = [
            weight * reward_map[name]
            for name, weight in zip(trainer.reward_func_names, weights, strict=True)
            if reward_map.get(name) is not None
        ]
        dropped = trainer.benchmax_drop_unscorable and not outcome.scored
        outcomes.append(None if dropped or not values else sum(values))
    rows = token_advantages(
        batch.sequences,
        batch.outcomes,
        outcomes,
        trainer.num_generations,
        mode="per_turn",
        gamma=trainer.benchmax_turn_discount,
        scale=trainer.scale_rewards != "none",
    )
    advantages = torch.zeros(completion_ids.shape, dtype=torch.float32)
    for row, values in enumerate(rows):
        width = min(len(values), advantages.shape[1])
        advantages[row, :width] = torch.tensor(values[:width], dtype=torch.float32)
    return advantages.to(completion_ids.device)


def _weigh(trainer: Any, inputs: dict[str, Any], logps: torch.Tensor) -> None:
    """The loss's advantages weighed by each token's truncated importance ratio (in-process generation
    only: TRL weighs vLLM's), and the ratio's figures logged whatever generates."""
    sampling = inputs.get("sampling_per_token_logps")
    if sampling is None:
        return
    mask = inputs["completion_mask"]
    if "tool_mask" in inputs:
        mask = mask * inputs["tool_mask"]
    mask = mask.to(logps.dtype)
    log_ratio = logps.detach() - sampling
    known = mask.bool() & ~torch.isnan(sampling)
    if known.any():
        mode = "train" if trainer.model.training else "eval"
        _log_ratio_figures(trainer._metrics[mode], log_ratio[known], trainer.args.vllm_importance_sampling_clip_max)
    if not trainer.benchmax_correct or getattr(trainer, "use_vllm", False):
        return
    weights = importance_weights(
        log_ratio,
        mask,
        mode=trainer.args.vllm_importance_sampling_mode,
        cap=trainer.args.vllm_importance_sampling_clip_max,
        floor=trainer.args.vllm_importance_sampling_clip_min,
    )
    # weigh the advantages as generated, however often TRL hands this batch over
    advantages = inputs.setdefault("benchmax_advantages", inputs["advantages"])
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    inputs["advantages"] = advantages * weights


def _log_ratio_figures(metrics: Any, values: torch.Tensor, cap: float | None) -> None:
    """The step's figures of ``log pi_theta - log pi_sampler`` over its known tokens: the IS
    ratio's mean, min, max and truncated share, the k3 KL(pi_sampler || pi_theta), the largest gap."""
    ratio = torch.exp(values)
    metrics["is_ratio/mean"].append(ratio.mean().item())
    metrics["is_ratio/min"].append(ratio.min().item())
    metrics["is_ratio/max"].append(ratio.max().item())
    if cap is not None:
        metrics["is_ratio/truncated"].append((ratio > cap).float().mean().item())
    metrics["kl/sampler"].append((torch.expm1(values) - values).mean().item())
    metrics["tokens/logprob_diff_max"].append(values.abs().max().item())
