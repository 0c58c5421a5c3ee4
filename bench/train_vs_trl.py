"""benchmax train beside TRL's own GRPOTrainer: same task, model and hyper-parameters (prints figures).

Both sides train the embedded SmolLM2-135M on ``examples/format`` (single
turn) for ``--steps`` GRPO steps with the same group size, prompts per step,
token limit, temperature, learning rate, loss, seed and thread count:

- ``trl``: ``GRPOTrainer`` with its default generation (transformers
  ``generate`` inside TRL, no ``rollout_func``); the env's ``compute_reward``
  scores each completion through ``benchmax.train.adapters.VerlRewardAdapter``,
  one TRL reward function per component;
- ``benchmax``: ``benchmax.train.train`` with its defaults (the engine runs
  every rollout, async generation one step ahead, dead groups dropped);
- ``benchmax-sync``: the same with ``async_steps=0, dead_groups=keep`` (what
  differs is then only the rollout path);
- ``benchmax-async0``: the defaults but ``async_steps=0`` (dead groups still dropped).

Both save as ``benchmax train`` does by default (and TRL's own default
``save_strategy="steps"`` does): once, when training ends, so both write the
final checkpoint (weights and optimizer state, 1.6 GB here).

Each side runs in a fresh process, the sides alternate (the order flips per
seed and repeat) so drift in machine load hits all of them, and each final
model is evaluated on the held-out split through the same eval path
(``benchmax.train.eval_policy``). Steps per minute count the same window on
both sides: ``Trainer.train`` from its ``on_train_begin`` callback to its
``on_train_end`` (the final save included; model load and eval excluded). The
ratio is given per seed (each run against the TRL run beside it) and overall
(all steps over all seconds)::

    nice -n 10 python bench/train_vs_trl.py --steps 8 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = str(ROOT / "examples" / "format")
SIDES = ("trl", "benchmax", "benchmax-sync", "benchmax-async0")


SAVE_STEPS = 10_000
"""Both sides save like ``benchmax train`` by default: every ``save_steps`` and once at the end
(HF's ``save_strategy="steps"``, also TRL's default), so both write the final checkpoint."""


def settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "group_size": args.group_size,
        "prompts_per_step": args.prompts,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
    }


def clock() -> Any:
    """The same window on both sides: TRL's ``train()`` from its first callback to its last
    (the final checkpoint included, model load and the eval runs not)."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        started = ended = 0.0
        saving = 0.0

        def on_train_begin(self, *a: Any, **k: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.last_step = time.perf_counter()

        def on_save(self, *a: Any, **k: Any) -> None:
            self.saving += time.perf_counter() - self.last_step

        def on_train_end(self, *a: Any, **k: Any) -> None:
            self.ended = time.perf_counter()

    return Clock()


def run_trl(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    import asyncio

    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from benchmax.loading import load_env
    from benchmax.train import eval_policy, load_policy_model
    from benchmax.train.adapters import VerlRewardAdapter

    env, base_dir = load_env(ENV, {})
    examples = asyncio.run(env.create_dataset("train", base_dir))
    rows = [dict(example.payload) for example in examples]
    dataset = Dataset.from_dict(
        {"prompt": [row["prompt_messages"] for row in rows], "payload": [json.dumps(row) for row in rows]}
    )
    scorer = VerlRewardAdapter(env)

    def component(name: str) -> Any:
        def reward(completions: list[Any], payload: list[str], **_: Any) -> list[float]:
            values = []
            for completion, raw in zip(completions, payload, strict=True):
                text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
                scored = scorer("trl", text, None, {"payload": json.loads(raw)})
                values.append(float(scored.get(name, 0.0)))
            return values

        reward.__name__ = name
        return reward

    model, tokenizer = load_policy_model("embedded")
    config = settings(args)
    batch = config["prompts_per_step"] * config["group_size"]
    timer = clock()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[component(name) for name in args.components],
        args=GRPOConfig(
            output_dir=str(out / "checkpoints"),
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=1,
            steps_per_generation=1,
            num_generations=config["group_size"],
            max_completion_length=config["max_tokens"],
            temperature=config["temperature"],
            top_p=1.0,
            top_k=0,
            learning_rate=config["learning_rate"],
            beta=0.0,
            max_steps=args.steps,
            logging_steps=1,
            save_strategy="steps",
            save_steps=SAVE_STEPS,
            save_total_limit=2,
            report_to="none",
            use_cpu=True,
            bf16=False,
            seed=config["seed"],
            dataloader_num_workers=0,
            disable_tqdm=True,
            gradient_checkpointing=False,
        ),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    torch.manual_seed(config["seed"])
    trainer.train()
    history = [entry for entry in trainer.state.log_history if "reward" in entry]
    summary = eval_policy(
        ENV,
        trainer.model,
        tokenizer,
        run_dir=out / "eval",
        group_size=args.eval_group_size,
        temperature=config["temperature"],
        max_tokens=config["max_tokens"],
    )
    return {
        "seconds": timer.ended - timer.started,
        "saving": timer.saving,
        "rollouts": batch * int(trainer.state.global_step),
        "steps": int(trainer.state.global_step),
        "rewards": [entry["reward"] for entry in history],
        "eval": dict(summary.means),
    }


def run_benchmax(args: argparse.Namespace, out: Path, *, side: str) -> dict[str, Any]:
    from benchmax.store import Run
    from benchmax.train import build, run

    options = dict(settings(args))
    if side == "benchmax-sync":
        options.update(async_steps=0, dead_groups="keep")
    elif side == "benchmax-async0":
        options.update(async_steps=0)
    session = build(
        ENV,
        model="embedded",
        run_dir=out / "run",
        max_steps=args.steps,
        save_steps=SAVE_STEPS,
        threads=args.threads,
        weights={name: 1.0 for name in args.components},
        eval_group_size=args.eval_group_size,
        **options,
    )
    timer = clock()
    session.trainer.add_callback(timer)
    try:
        result = run(session)
    finally:
        session.close()
    with Run(result.run_dir) as stored:
        steps = stored.steps()
    assert result.eval_after is not None and result.eval_before is not None
    return {
        "seconds": timer.ended - timer.started,
        "saving": timer.saving,
        "rollouts": int(sum(metrics.get("rollouts/generated", 0.0) for _, _, metrics in steps)),
        "steps": result.steps,
        "rewards": [float(metrics.get("generated/reward", metrics.get("reward", 0.0))) for _, _, metrics in steps],
        "eval": dict(result.eval_after.means),
        "eval_before": dict(result.eval_before.means),
    }


def worker(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figures = run_trl(args, out) if args.side == "trl" else run_benchmax(args, out, side=args.side)
    figures["load"] = os.getloadavg()[0]
    (out / "figures.json").write_text(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run of each side per seed and repeat")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-group-size", type=int, default=4)
    parser.add_argument("--components", nargs="+", default=["correct", "brevity"])
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    parser.add_argument("--out", default="/tmp/benchmax-train-vs-trl")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        worker(args)
        return
    results: list[tuple[str, int, dict[str, Any]]] = []
    turn = 0
    for repeat in range(args.repeats):
        for seed in args.seeds:
            order = args.sides if turn % 2 == 0 else list(reversed(args.sides))
            turn += 1
            for side in order:
                results.append((side, seed, run_side(args, side, seed, repeat)))
    report(args, results)


def run_side(args: argparse.Namespace, side: str, seed: int, repeat: int) -> dict[str, Any]:
    """One side in a fresh process; its figures, with the load average it started under."""
    out = Path(args.out) / f"{side}-s{seed}-{repeat}"
    command = [sys.executable, __file__, "--side", side, "--out", str(out), "--seed", str(seed)]
    for flag in ("steps", "group_size", "prompts", "max_tokens", "temperature", "learning_rate", "threads",
                 "eval_group_size"):  # fmt: skip
        command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    command += ["--components", *args.components]
    started = os.getloadavg()[0]
    print(f"[{side} seed {seed} #{repeat}] load {started:.2f}", flush=True)
    shutil.rmtree(out, ignore_errors=True)  # an earlier call's eval run dir would be refused
    out.mkdir(parents=True)
    log = out.parent / f"{out.name}.log"
    with log.open("w") as handle:
        done = subprocess.run(command, check=False, stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"{side} seed {seed} #{repeat} exited {done.returncode}: see {log}")
    figures = json.loads((out / "figures.json").read_text())
    figures["load_start"] = started
    return figures


def report(args: argparse.Namespace, results: list[tuple[str, int, dict[str, Any]]]) -> None:
    print()
    print(f"{args.steps} steps, group {args.group_size} x {args.prompts} prompts, {args.max_tokens} tokens, "
          f"T={args.temperature}, lr {args.learning_rate}, {args.threads} threads")  # fmt: skip
    names = ", ".join(args.components)
    print(f"| side | seed | steps/min | rollouts | final save s | reward, first 5 steps | reward, last 5 steps "
          f"| eval after ({names}) | load |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for side, seed, figures in results:
        rewards = figures["rewards"]
        rate = 60 * figures["steps"] / figures["seconds"]
        head = sum(rewards[:5]) / max(1, len(rewards[:5]))
        tail = sum(rewards[-5:]) / max(1, len(rewards[-5:]))
        evals = ", ".join(f"{figures['eval'].get(name, float('nan')):.3f}" for name in args.components)
        print(f"| {side} | {seed} | {rate:.2f} | {figures['rollouts']} | {figures['saving']:.1f} | {head:.3f} | "
              f"{tail:.3f} | {evals} | {figures['load_start']:.1f}-{figures['load']:.1f} |")  # fmt: skip
    if not any(side == "trl" for side, _, _ in results):
        return
    # each run against the TRL run of the same seed and repeat (they ran back to back)
    theirs = [figures for side, _, figures in results if side == "trl"]
    for side in args.sides:
        if side == "trl":
            continue
        ours = [(seed, figures) for name, seed, figures in results if name == side]
        ratios = [
            (seed, (mine["steps"] / mine["seconds"]) / (trl["steps"] / trl["seconds"]))
            for (seed, mine), trl in zip(ours, theirs, strict=True)
        ]
        overall = (sum(f["steps"] for _, f in ours) / sum(f["seconds"] for _, f in ours)) / (
            sum(f["steps"] for f in theirs) / sum(f["seconds"] for f in theirs)
        )
        listed = ", ".join(f"seed {seed} {ratio:.2f}x" for seed, ratio in ratios)
        print(f"{side} / trl steps per minute: {listed}; overall {overall:.2f}x")


if __name__ == "__main__":
    main()
