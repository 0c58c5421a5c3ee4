"""A rollout's further token sequences as rows of TRL's batch, with the rollout's advantage.

TRL's GRPO keeps one row per rollout: rewards, groups and advantages are per
row. An agent's rollout may hold several token sequences (a sub-agent's calls,
a summarised history: calls that do not extend one another); each must be
trained as it was sampled, never joined to another or re-rendered. So the
rollout goes to TRL as its first sequence, TRL scores it and computes its
advantage, and here, before the batch is split and trained on, each further
sequence is appended as a row of its own carrying that advantage, with the
per-token tensors TRL built for the first rows (the sampler's logprobs, the
old and reference logprobs and vLLM's importance ratio where TRL computed them)
computed the same way for the new rows.

Loss weight: with TRL's default ``dapo`` loss (and ``bnpo``, ``cispo``,
``dr_grpo``) every trained token weighs the same, and ``num_items_in_batch`` is
recounted here over all rows, so a rollout weighs by the tokens it generated
however many sequences hold them, exactly as a one-sequence rollout of the same
tokens. Losses that average per row first (``grpo``, ``sapo``, ``luspo``) weigh
each sequence as one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from benchmax.train._importance import importance_weights
from benchmax.train._sequences import TokenSequence

PER_TOKEN_KEYS = ("sampling_per_token_logps", "old_per_token_logps", "ref_per_token_logps")


def add_sequence_rows(trainer: Any, output: dict[str, Any], extra: Sequence[Sequence[TokenSequence]]) -> dict[str, Any]:
    """``output`` (TRL's scored batch, one row per rollout) with a row per further sequence.

    ``extra[i]`` are rollout ``i``'s sequences after its first. Nothing to add:
    ``output`` is returned as it is.
    """
    rows = [(row, sequence) for row, sequences in enumerate(extra) for sequence in sequences]
    if not rows:
        return output
    plain = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "num_items_in_batch"}
    unknown = sorted(set(output) - plain - {"tool_mask", "importance_sampling_ratio", *PER_TOKEN_KEYS})
    if unknown:
        raise ValueError(f"cannot add a rollout's further token sequences to a batch with {', '.join(unknown)}")
    device = output["prompt_ids"].device
    pad = trainer.processing_class.pad_token_id
    prompts = [torch.tensor(sequence.prompt_ids, dtype=torch.long) for _, sequence in rows]
    completions = [torch.tensor(sequence.completion_ids, dtype=torch.long) for _, sequence in rows]
    width = max(output["prompt_ids"].size(1), *(len(ids) for ids in prompts))
    length = max(output["completion_ids"].size(1), *(len(ids) for ids in completions))
    new: dict[str, torch.Tensor] = {
        "prompt_ids": _stack(prompts, width, pad, left=True),
        "prompt_mask": _stack([torch.ones_like(ids) for ids in prompts], width, 0, left=True),
        "completion_ids": _stack(completions, length, pad),
        "completion_mask": _stack([torch.ones_like(ids) for ids in completions], length, 0),
        "advantages": output["advantages"][[row for row, _ in rows]].cpu(),
    }
    if "tool_mask" in output:
        masks = [torch.tensor(sequence.env_mask, dtype=torch.long) for _, sequence in rows]
        new["tool_mask"] = _stack(masks, length, 1)
    if "sampling_per_token_logps" in output:
        logprobs = [torch.tensor(sequence.logprobs, dtype=torch.float32) for _, sequence in rows]
        new["sampling_per_token_logps"] = _stack(logprobs, length, 0.0)
    if getattr(trainer, "mask_truncated_completions", False):
        ends = {*trainer.eos_token_ids, pad}
        kept = torch.tensor([[sequence.completion_ids[-1] in ends] for _, sequence in rows], dtype=torch.long)
        new["completion_mask"] = new["completion_mask"] * kept
        if "tool_mask" in new:
            new["tool_mask"] = new["tool_mask"] * kept
    new = {key: value.to(device) for key, value in new.items()}
    _model_logps(trainer, output, new)
    merged = dict(output)
    for key, value in new.items():
        old = output[key]
        if old.dim() == 2:
            fill = pad if key.endswith("_ids") else PAD_VALUES.get(key, 0)
            old = _widen(old, width if key.startswith("prompt") else length, key, fill)
            value = _widen(value, old.size(1), key, fill)
        merged[key] = torch.cat([old, value.to(old.dtype)], dim=0)
    chunks = trainer.args.steps_per_generation
    if trainer.model.training and len(merged["advantages"]) % chunks:
        raise ValueError(
            f"{len(merged['advantages'])} rows (rollouts plus their further token sequences) do not split into "
            f"steps_per_generation={chunks} equal parts; train agents with several sequences at steps_per_generation=1"
        )
    mask = merged["completion_mask"] * merged["tool_mask"] if "tool_mask" in merged else merged["completion_mask"]
    merged["num_items_in_batch"] = mask.sum().to(output["num_items_in_batch"].dtype)
    return merged


def _model_logps(trainer: Any, output: dict[str, Any], new: dict[str, torch.Tensor]) -> None:
    """The new rows' old and reference logprobs and importance ratio, where TRL computed them."""
    wanted = [key for key in ("old_per_token_logps", "ref_per_token_logps") if key in output]
    if not wanted and "importance_sampling_ratio" not in output:
        return
    ids = torch.cat([new["prompt_ids"], new["completion_ids"]], dim=1)
    attention = torch.cat([new["prompt_mask"], new["completion_mask"]], dim=1)
    keep = new["completion_ids"].size(1)
    args = trainer.args
    size = args.per_device_train_batch_size if trainer.model.training else args.per_device_eval_batch_size
    with torch.no_grad():
        for key in wanted:
            model = trainer.ref_model if key == "ref_per_token_logps" else trainer.model
            if model is None:
                raise ValueError("the reference model's logprobs of a rollout's further sequences need a ref_model")
            new[key] = trainer._get_per_token_logps_and_entropies(model, ids, attention, keep, batch_size=size)[0]
    if "importance_sampling_ratio" in output:
        mask = new["completion_mask"] * new.get("tool_mask", torch.ones_like(new["completion_mask"]))
        new["importance_sampling_ratio"] = importance_weights(
            new["old_per_token_logps"] - new["sampling_per_token_logps"],
            mask,
            mode=args.vllm_importance_sampling_mode,
            cap=args.vllm_importance_sampling_clip_max,
            floor=args.vllm_importance_sampling_clip_min,
        )


def _stack(rows: Sequence[torch.Tensor], width: int, value: float, *, left: bool = False) -> torch.Tensor:
    out = torch.full((len(rows), width), value, dtype=rows[0].dtype)
    for index, row in enumerate(rows):
        if left:
            out[index, width - len(row) :] = row
        else:
            out[index, : len(row)] = row
    return out


PAD_VALUES = {"tool_mask": 1, "importance_sampling_ratio": 1.0}
"""What TRL pads each per-token tensor with (0 unless named)."""


def _widen(tensor: torch.Tensor, width: int, key: str, value: float) -> torch.Tensor:
    """``tensor`` padded to ``width`` columns: prompts on the left, completions on the right."""
    missing = width - tensor.size(1)
    if missing <= 0 or (key == "importance_sampling_ratio" and tensor.size(1) == 1):
        return tensor
    fill = torch.full((tensor.size(0), missing), value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([fill, tensor] if key.startswith("prompt") else [tensor, fill], dim=1)
