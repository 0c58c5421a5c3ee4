"""Base rate of a policy on an env, the way training samples it (not a test: it prints figures).

Runs the in-process policy (the same rendering, tool-call parsing and sampling
as ``benchmax train``) through the runner's eval path on each split asked for,
one group of ``--group-size`` per example, and prints the mean per component,
how rollouts ended, and how many ran a tool at all::

    nice -n 10 python bench/train_base_rate.py examples/math --split train --split eval \\
        --group-size 8 --temperature 1.0 --max-tokens 48 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--split", action="append", default=None)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--env-arg", action="append", default=[], help="key=JSON constructor argument")
    parser.add_argument("--show", type=int, default=3, help="transcripts to print per split")
    parser.add_argument("--out", type=Path, default=None, help="keep the eval runs here")
    args = parser.parse_args()

    import torch

    from benchmax.store import Run
    from benchmax.train import eval_policy, load_policy_model

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    env_kwargs = {key: json.loads(value) for key, _, value in (item.partition("=") for item in args.env_arg)}
    started = time.perf_counter()
    model, tokenizer = load_policy_model(args.model)
    print(f"model {args.model} loaded in {time.perf_counter() - started:.1f}s; load {os.getloadavg()[0]:.2f}")
    out = args.out or Path(tempfile.mkdtemp(prefix="base-rate-"))
    for split in args.split or ["eval"]:
        started = time.perf_counter()
        summary = eval_policy(
            args.env,
            model,
            tokenizer,
            run_dir=out / split,
            split=split,
            group_size=args.group_size,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            max_examples=args.max_examples,
            env_kwargs=env_kwargs,
        )
        seconds = time.perf_counter() - started
        with Run(out / split) as stored:
            rollouts = list(stored.rollouts())
        tools = sum(rollout.num_tool_calls > 0 for rollout in rollouts)
        turns = sum(rollout.num_turns for rollout in rollouts) / max(len(rollouts), 1)
        ranked = sorted(rollouts, key=lambda rollout: -(rollout.reward or 0.0))
        shown = [(rollout.rollout_id, rollout.messages, rollout.reward) for rollout in ranked[: args.show]]
        print(
            f"{split}: {summary.line()}; ended {dict(summary.reasons)}; {tools} with a tool call; "
            f"{turns:.2f} turns per rollout; {seconds:.0f}s; load {os.getloadavg()[0]:.2f}"
        )
        for rollout_id, messages, reward in shown:
            print(f"  {rollout_id} reward {reward}:")
            for message in messages[1:]:
                content = str(message.get("content") or "")[:160].replace("\n", " ")
                calls = [call["function"] for call in message.get("tool_calls") or []]
                print(f"    {message['role']}: {content!r}{' calls ' + json.dumps(calls) if calls else ''}")
    print(f"runs kept in {out}")


if __name__ == "__main__":
    main()
