"""TRL's ``GRPOTrainer`` as benchmax configures it: the ``GRPOConfig`` a run's config
becomes, the layers it trains, and the starting weights colocated vLLM loads."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmax.train._config import TrainConfig, TrainError
from benchmax.train._grpo import trainer_class
from benchmax.train._progress import RunLogCallback
from benchmax.train._rewards import component_reward
from benchmax.train._rollouts import RolloutBridge

logger = logging.getLogger("benchmax.train")

CHECKPOINTS = "checkpoints"


def freeze_below(model: Any, layers: int) -> None:
    """Train only the top ``layers`` decoder layers and the final norm.

    Backward then stops at the lowest trained layer: on a CPU the step costs
    about a forward pass plus ``layers / total`` of a backward one. With tied
    embeddings (SmolLM2) the LM head stays frozen with them.
    """
    blocks = getattr(getattr(model, "model", None), "layers", None)
    if blocks is None or not hasattr(blocks, "__len__"):
        raise TrainError(f"train_layers needs a decoder with model.model.layers; {type(model).__name__} has none")
    if layers > len(blocks):
        raise TrainError(f"train_layers={layers}, but the model has {len(blocks)} layers")
    model.requires_grad_(False)
    for block in list(blocks)[len(blocks) - layers :]:
        block.requires_grad_(True)
    norm = getattr(model.model, "norm", None)
    if norm is not None:
        norm.requires_grad_(True)


def grpo_trainer(
    config: TrainConfig,
    model: Any,
    tokenizer: Any,
    bridge: RolloutBridge,
    components: Sequence[str],
    examples: Mapping[str, Any],
    run_dir: Path,
) -> Any:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # TRL imports weave when it is installed, and weave reports errors to Sentry over the network.
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    from datasets import Dataset as ArrowDataset
    from transformers import PrinterCallback
    from trl import GRPOConfig

    batch = config.prompts_per_step * config.group_size
    arguments: dict[str, Any] = {
        "output_dir": str(run_dir / CHECKPOINTS),
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": 1,
        "num_generations": config.group_size,
        "max_completion_length": config.max_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "learning_rate": config.learning_rate,
        "beta": config.beta,
        "max_steps": config.max_steps,
        "logging_steps": 1,
        "save_steps": config.save_steps,
        "save_total_limit": 2,
        "reward_weights": [float(config.weights.get(name, 1.0)) for name in components],
        "report_to": "none",
        "use_cpu": not _cuda(),
        "bf16": False,
        "seed": config.seed,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }
    if config.vllm is not None:
        arguments.update(use_vllm=True, vllm_mode=config.vllm)
        if config.vllm == "server":
            arguments["vllm_server_base_url"] = config.vllm_url
        else:
            # the default (0.9) leaves the trainer no room on a shared GPU
            arguments["vllm_gpu_memory_utilization"] = 0.3
    if config.vllm is None or config.async_steps:
        # in-process or stale rollouts: truncated per-token importance weights (TIS); TRL's
        # default for vLLM (sequence_mask) drops a whole sequence once its ratio passes the cap
        arguments["vllm_importance_sampling_mode"] = "token_truncate"
    arguments.update(config.trl_args)
    if not {"gradient_checkpointing", "activation_checkpointing"} & set(config.trl_args):
        # TRL turns it on by default; it trades compute for memory a CPU run has plenty of,
        # and it makes backward run through frozen layers (train_layers). Under its current
        # name where transformers has one: the old name prints a FutureWarning mid-run.
        renamed = "activation_checkpointing" in GRPOConfig.__dataclass_fields__
        arguments["activation_checkpointing" if renamed else "gradient_checkpointing"] = False
    trainer = trainer_class()(
        model=model,
        reward_funcs=[component_reward(name, drop_unscorable=config.drop_unscorable) for name in components],
        args=GRPOConfig(**arguments),
        train_dataset=ArrowDataset.from_dict({"prompt": list(examples)}),
        processing_class=tokenizer,
        rollout_func=bridge,
        callbacks=[RunLogCallback(run_dir, f"{config.env} · {config.model}", config.max_minutes)],
    )
    trainer.benchmax_correct = config.passes_per_batch == 1
    trainer.benchmax_credit = config.credit
    trainer.benchmax_turn_discount = config.turn_discount
    trainer.benchmax_drop_unscorable = config.drop_unscorable
    # benchmax reports each step itself (a line per step, metrics.jsonl, the run store)
    trainer.remove_callback(PrinterCallback)
    return trainer


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def loadable_by_vllm(model: Any, tokenizer: Any, run_dir: Path) -> None:
    """Colocated vLLM loads the policy from ``model.name_or_path``: a model read
    from a GGUF file (the embedded one) or built in memory has no such
    directory, so its starting weights are written into the run dir first."""
    source = Path(str(getattr(model, "name_or_path", "") or ""))
    if (source / "config.json").is_file() and any(source.glob("*.safetensors")):
        return
    target = run_dir / "policy-init"
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    model.config._name_or_path = str(target)
    model.name_or_path = str(target)
    logger.info("wrote the starting weights to %s for vLLM to load", target)
