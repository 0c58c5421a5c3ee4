"""Runs inside a Python that has vLLM (``BENCHMAX_VLLM_PYTHON``); prints JSON facts.

vLLM pins its own transformers and torch builds, so it lives in its own
virtual environment and ``test_vllm.py`` drives this script there:

- ``serve DIR PORT``: a real vLLM OpenAI-compatible server for the tiny model.
- ``colocate DIR RUN_DIR OUT``: ``benchmax train`` with TRL's colocated vLLM,
  recording at every step how the rollouts' sampling logprobs compare with the
  trainer's current weights and with its starting weights.
- ``colocate-async DIR RUN_DIR OUT``: the same with ``async_steps=1``, each
  weight push held until the next step is generated ahead: every turn's
  logprobs against the trainer's weights at the policy version the turn
  records, and the staleness of each step.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

SEQUENCE_BIAS = 2.5
"""Added to end-of-turn, ``<tool_call>`` and whole-call tokens, so the random
policy ends turns and calls tools often (vLLM's ``logit_bias``)."""


def serve(directory: str, port: str) -> None:
    os.execv(
        sys.executable,
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            directory,
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--logprobs-mode",
            "processed_logprobs",
            "--max-logprobs",
            "-1",
        ],
    )


def favoured(tokenizer) -> dict[int, float]:
    from benchmax.train.tiny import favoured_tokens

    return {int(token): SEQUENCE_BIAS for token in favoured_tokens(tokenizer)}


def biased_logprobs(model, bias: dict[int, float], prompt: list[int], completion: list[int]) -> list[float]:
    """Logprobs of ``completion`` under ``model`` with vLLM's logit bias applied."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    for token, value in bias.items():
        logits[:, token] += value
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1).tolist()


def colocate(directory: str, run_dir: str, out: str) -> None:
    from calculator_env import CalculatorEnv
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmax.train import build, run

    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    bias = favoured(tokenizer)
    start = AutoModelForCausalLM.from_pretrained(directory).eval()
    session = build(
        CalculatorEnv(),
        model=directory,
        run_dir=Path(run_dir),
        max_steps=3,
        group_size=4,
        prompts_per_step=2,
        max_tokens=12,
        learning_rate=0.02,
        save_steps=100,
        vllm="colocate",
        vllm_sampling={"logit_bias": bias},
        async_steps=0,
        dead_groups="keep",
    )
    session.policy.record = True
    trainer, bridge = session.trainer, session.bridge
    steps: list[dict[str, object]] = []
    generated = trainer.rollout_func

    def measured(prompts, trainer_):
        output = generated(prompts, trainer_)
        now, initial, tokens = 0.0, 0.0, 0
        model = trainer_.model
        was_training = model.training
        model.eval()
        for prompt, completion, mask, sampled in zip(
            output["prompt_ids"], output["completion_ids"], output["env_mask"], output["logprobs"], strict=True
        ):
            if not any(mask):
                continue
            current = biased_logprobs(model, bias, prompt, completion)
            first = biased_logprobs(start, bias, prompt, completion)
            for bit, value, a, b in zip(mask, sampled, current, first, strict=True):
                if bit:
                    now += abs(value - a)
                    initial += abs(value - b)
                    tokens += 1
        if was_training:
            model.train()
        batch = bridge.last
        records = {(r.prompt_ids, r.completion_ids) for r in session.policy.records}
        steps.append(
            {
                "step": batch.step,
                "tokens": tokens,
                "diff_current": now / max(tokens, 1),
                "diff_start": initial / max(tokens, 1),
                "rollouts": len(batch.outcomes),
                "multi_turn": sum(len(outcome.turns) > 1 for outcome in batch.outcomes),
                "tool_ran": sum(
                    any(m["role"] == "tool" and "result five" in str(m.get("content")) for m in outcome.messages)
                    for outcome in batch.outcomes
                ),
                "reasons": sorted({outcome.termination_reason for outcome in batch.outcomes}),
                "turns_as_generated": all(
                    (turn.prompt_token_ids, turn.completion_token_ids) in records
                    for outcome in batch.outcomes
                    for turn in outcome.turns
                ),
                "stream_is_last_turn": all(
                    list(prompt) + list(completion)
                    == list(outcome.turns[-1].prompt_token_ids) + list(outcome.turns[-1].completion_token_ids)
                    for prompt, completion, outcome in zip(
                        output["prompt_ids"], output["completion_ids"], batch.outcomes, strict=True
                    )
                    if outcome.turns
                ),
            }
        )
        return output

    trainer.rollout_func = measured
    try:
        result = run(session)
    finally:
        session.close()
    Path(out).write_text(
        json.dumps(
            {
                "steps": result.steps,
                "rewards": result.rewards(),
                "components": list(result.components),
                "measured": steps,
                "policy": type(session.policy).__name__,
                "generate_calls": session.policy.generate_calls,
            }
        )
    )


def colocate_async(directory: str, run_dir: str, out: str) -> None:
    from calculator_env import CalculatorEnv
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmax.train import build, run

    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    bias = favoured(tokenizer)
    scratch = AutoModelForCausalLM.from_pretrained(directory).eval()
    session = build(
        CalculatorEnv(),
        model=directory,
        run_dir=Path(run_dir),
        max_steps=4,
        group_size=4,
        prompts_per_step=2,
        max_tokens=12,
        learning_rate=0.02,
        save_steps=100,
        vllm="colocate",
        vllm_sampling={"logit_bias": bias},
        async_steps=1,
        dead_groups="keep",
    )
    trainer, bridge = session.trainer, session.bridge
    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    synced = bridge.before_step

    def before_step(trainer_, step):
        # TRL pushed the weights of this step to vLLM just before: keep them to compare with
        snapshots[step] = {name: value.detach().clone() for name, value in trainer_.model.state_dict().items()}
        synced(trainer_, step)

    bridge.before_step = before_step
    push = trainer.vllm_generation.sync_weights

    def sync_weights():
        # hold TRL's push of step k's weights until step k is generated from step k-1's:
        # every turn of a later step is then one update stale, whatever the machine's speed
        step = int(trainer.state.global_step)
        pipeline = bridge._pipeline
        deadline = time.monotonic() + 300
        while step > 0 and pipeline is not None and not pipeline.generated(step):
            if time.monotonic() > deadline:
                raise RuntimeError(f"step {step} was not generated ahead within 300 s")
            time.sleep(0.01)
        push()

    trainer.vllm_generation.sync_weights = sync_weights
    steps: list[dict[str, object]] = []
    generated = trainer.rollout_func

    def measured(prompts, trainer_):
        output = generated(prompts, trainer_)
        batch = bridge.last
        own, current, tokens = 0.0, 0.0, 0
        versions = []
        now = {name: value.detach().clone() for name, value in trainer_.model.state_dict().items()}
        for outcome in batch.outcomes:
            for turn in outcome.turns:
                versions.append(turn.policy_version)
                prompt, completion = list(turn.prompt_token_ids), list(turn.completion_token_ids)
                scratch.load_state_dict(snapshots[turn.policy_version])
                by_version = biased_logprobs(scratch, bias, prompt, completion)
                scratch.load_state_dict(now)
                by_current = biased_logprobs(scratch, bias, prompt, completion)
                for value, a, b in zip(turn.completion_logprobs, by_version, by_current, strict=True):
                    if math.isfinite(value):
                        own += abs(value - a)
                        current += abs(value - b)
                        tokens += 1
        steps.append(
            {
                "step": batch.step,
                "tokens": tokens,
                "diff_own_version": own / max(tokens, 1),
                "diff_current": current / max(tokens, 1),
                "versions": sorted(set(versions)),
                "staleness": batch.step - min(versions),
            }
        )
        return output

    trainer.rollout_func = measured
    try:
        result = run(session)
    finally:
        session.close()
    Path(out).write_text(json.dumps({"steps": result.steps, "measured": steps, "rewards": result.rewards()}))


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"serve": serve, "colocate": colocate, "colocate-async": colocate_async}[command](*arguments)
