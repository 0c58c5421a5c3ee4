"""With and without a curriculum: dead groups generated and steps to a held-out target (prints figures).

Each condition trains the same config from the same seed in a fresh process (the two
run at once, so the machine's load hits both alike; give each ``--threads 1``), and
evaluates the held-out ``eval`` split every ``--eval-every`` steps (and at step 0) with
the weights as they are then; every held-out eval draws its samples from the same
seed in both conditions, and does not move the training's random state. Printed per
condition: the groups and rollouts generated, the dead groups among them (generated,
then dropped and refilled), the held-out mean reward and the mean of ``--target-component``
at each eval, and the first step at which the held-out figure reached ``--target``::

    nice -n 10 python bench/train_curriculum.py --steps 16 --eval-every 2 \\
        --curriculum 'filter(recheck=8)' --target-component exact --target 0.5 -- \\
        examples/format --max-examples 16 --group-size 4 --prompts-per-step 4 --max-tokens 8 \\
        --temperature 0.8 --learning-rate 5e-5 --threads 1

Everything after ``--`` goes to ``benchmax.train.build`` as ``benchmax train`` would parse it:
the env, then ``--group-size``, ``--prompts-per-step``, ``--max-tokens``, ``--temperature``,
``--learning-rate``, ``--threads``, ``--seed``, ``--model``, ``--train-layers``, ``--max-examples``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_TRAIN_OPTIONS = {
    "--group-size": ("group_size", int),
    "--prompts-per-step": ("prompts_per_step", int),
    "--max-tokens": ("max_tokens", int),
    "--temperature": ("temperature", float),
    "--learning-rate": ("learning_rate", float),
    "--threads": ("threads", int),
    "--seed": ("seed", int),
    "--model": ("model", str),
    "--train-layers": ("train_layers", int),
    "--max-examples": ("max_examples", int),
}


def _train_kwargs(extra: list[str]) -> tuple[str, dict[str, Any]]:
    env, options = extra[0], {}
    rest = extra[1:]
    for flag, value in zip(rest[::2], rest[1::2], strict=True):
        if flag not in _TRAIN_OPTIONS:
            raise SystemExit(f"unsupported option {flag} (known: {', '.join(_TRAIN_OPTIONS)})")
        name, kind = _TRAIN_OPTIONS[flag]
        options[name] = kind(value)
    return env, options


def child(args: argparse.Namespace, extra: list[str]) -> None:
    """One condition: train, evaluating the held-out split as it goes; results as JSON."""
    import torch
    from transformers import TrainerCallback

    from benchmax.train import build, eval_policy, run

    env, options = _train_kwargs(extra)
    session = build(
        env,
        run_dir=args.run_dir,
        max_steps=args.steps,
        save_steps=100000,
        async_steps=0,
        curriculum=args.curriculum or None,
        **options,
    )
    evals: list[dict[str, Any]] = []

    def evaluate(step: int) -> None:
        state = torch.random.get_rng_state()
        torch.manual_seed(10_000 + step)  # the same eval samples at the same step in every condition
        started = time.perf_counter()
        summary = eval_policy(
            session.env,
            session.trainer.model,
            session.tokenizer,
            run_dir=Path(args.run_dir) / f"heldout-step{step}",
            split="eval",
            group_size=args.eval_group_size,
            temperature=session.config.temperature,
            max_tokens=session.config.max_tokens,
            data_dir=session.base_dir,
            loop=session.loop,
        )
        torch.random.set_rng_state(state)
        total = sum(summary.means.values())
        evals.append({"step": step, "reward": total, "means": dict(summary.means)})
        print(f"  held-out at step {step}: {summary.line()} ({time.perf_counter() - started:.0f}s)", flush=True)

    class HeldOut(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, _args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % args.eval_every == 0 or state.global_step == args.steps:
                evaluate(int(state.global_step))

    session.trainer.add_callback(HeldOut())
    started = time.perf_counter()
    try:
        evaluate(0)
        result = run(session)
    finally:
        session.close()
    steps = [
        {key: entry.get(key) for key in ("step", "groups/drawn", "groups/dead", "rollouts/generated", "reward")}
        | {key: value for key, value in entry.items() if key.startswith("curriculum/")}
        for entry in result.log_history
        if "groups/drawn" in entry
    ]
    Path(args.result).write_text(
        json.dumps({"steps": steps, "evals": evals, "seconds": time.perf_counter() - started}, indent=1)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--eval-group-size", type=int, default=4)
    parser.add_argument("--curriculum", default="filter(recheck=8)")
    parser.add_argument("--target-component", default=None, help="held-out component of the target (default: the sum)")
    parser.add_argument("--target", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/benchmax-train-curriculum"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = [arg for arg in args.train_args if arg != "--"]
    if args.child:
        child(args, extra)
        return

    stamp = int(time.time())
    args.out.mkdir(parents=True, exist_ok=True)
    running = {}
    # both conditions at once, each in its own process: the machine's load hits both alike
    for name, curriculum in (("without", ""), ("with", args.curriculum)):
        run_dir = args.out / f"{name}-{stamp}"
        result = args.out / f"{name}-{stamp}.json"
        command = [
            sys.executable, __file__, "--child", "--run-dir", str(run_dir), "--result", str(result),
            "--steps", str(args.steps), "--eval-every", str(args.eval_every),
            "--eval-group-size", str(args.eval_group_size), "--curriculum", curriculum, "--", *extra,
        ]  # fmt: skip
        print(f"[{name} curriculum {curriculum or '-'}] load {os.getloadavg()[0]:.2f}", flush=True)
        log = (args.out / f"{name}-{stamp}.log").open("w")
        running[name] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), result, log)
    results = {}
    for name, (process, result, log) in running.items():
        code = process.wait()
        log.close()
        if code != 0:
            raise SystemExit(f"{name} failed (exit {code}); see {log.name}")
        results[name] = json.loads(result.read_text())

    print(f"\n{args.steps} steps, same seed; held-out every {args.eval_every} steps, target "
          f"{args.target_component or 'reward'} >= {args.target:g}")  # fmt: skip
    for name, data in results.items():
        steps = data["steps"]
        groups = sum(entry["groups/drawn"] or 0 for entry in steps)
        dead = sum(entry["groups/dead"] or 0 for entry in steps)
        rollouts = sum(entry["rollouts/generated"] or 0 for entry in steps)

        def held(entry: dict[str, Any]) -> float:
            if args.target_component is None:
                return float(entry["reward"])
            return float(entry["means"].get(args.target_component, 0.0))

        reached = next((entry["step"] for entry in data["evals"] if held(entry) >= args.target), None)
        curve = " ".join(f"{entry['step']}:{held(entry):.2f}" for entry in data["evals"])
        print(
            f"{name:>8}: groups {groups:.0f}, dead {dead:.0f} ({dead / max(groups, 1):.0%}), rollouts {rollouts:.0f}, "
            f"target reached at step {reached if reached is not None else f'- (not in {args.steps})'}, "
            f"{data['seconds']:.0f}s"
        )
        print(f"          held-out: {curve}")
        aside = [entry.get("curriculum/set_aside") for entry in steps if "curriculum/set_aside" in entry]
        if aside:
            print(f"          set aside per step: {' '.join(f'{value:.0f}' for value in aside)}")
        dead_steps = " ".join(f"{entry['groups/dead'] or 0:.0f}" for entry in steps)
        print(f"          dead per step: {dead_steps}")


if __name__ == "__main__":
    main()
