"""The GRPO loss's forward and backward: TRL's pass beside benchmax's prefix pass (prints figures).

TRL runs every row's whole prompt through the model; benchmax runs each distinct
prompt once and its rows on top (:mod:`benchmax.train._prefix`). Both compute the
same logprobs and gradients (``tests/train/test_prefix.py``); this times them on
the embedded SmolLM2-135M with a GRPO batch of ``--prompts`` distinct prompts x
``--group-size`` siblings, ``--completion`` tokens each, in one process, the two
passes alternating so machine load hits both::

    python bench/loss_prefix.py --prompts 4 --group-size 4 --completion 8 --repeats 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

import torch


def batch(tokenizer: Any, args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor, int]:
    rng = random.Random(0)
    system = "Answer in one word." if args.system_words == 0 else " ".join(["Think step by step."] * args.system_words)
    questions = ["What is the capital of France?", "What color is coal?", "Name a prime number.", "Who wrote Hamlet?"]
    prompts = []
    for index in range(args.prompts):
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"{questions[index % len(questions)]} ({index})"},
        ]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        prompts += [list(ids["input_ids"])] * args.group_size
    completions = [[rng.randrange(100, 20000) for _ in range(rng.randint(1, args.completion))] for _ in prompts]
    pad = tokenizer.pad_token_id or 0
    width = max(len(prompt) for prompt in prompts)
    ids, mask = [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        left, right = width - len(prompt), args.completion - len(completion)
        ids.append([pad] * left + prompt + completion + [pad] * right)
        mask.append([0] * left + [1] * (len(prompt) + len(completion)) + [0] * right)
    return torch.tensor(ids), torch.tensor(mask), args.completion


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--completion", type=int, default=8)
    parser.add_argument("--system-words", type=int, default=0, help="a longer system prompt: N sentences")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from trl.trainer.utils import add_fused_lm_head

    from benchmax.train import load_policy_model
    from benchmax.train._prefix import prefix_logps

    model, tokenizer = load_policy_model("embedded")
    model.train()
    add_fused_lm_head(model, temperature=0.8, outputs=("log_probs", "entropy"))
    input_ids, mask, keep = batch(tokenizer, args)
    completion_mask = mask[:, -keep:].float()

    def trl() -> torch.Tensor:
        labels = input_ids.masked_fill(mask == 0, -100)
        labels[:, :-keep] = -100
        return model(input_ids=input_ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs[:, -keep:]

    def prefix() -> torch.Tensor:
        result = prefix_logps(model, input_ids, mask, keep, compute_entropy=True)
        assert result is not None, "the batch shares too little for the prefix pass"
        return result[0]

    times: dict[str, list[float]] = {"trl": [], "prefix": []}
    for repeat in range(args.repeats + 1):
        for name, run in (("trl", trl), ("prefix", prefix)) if repeat % 2 else (("prefix", prefix), ("trl", trl)):
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            (run() * completion_mask).sum().backward()
            if repeat:  # the first round warms both up
                times[name].append(time.perf_counter() - started)
    rows, width = input_ids.shape
    print(f"{rows} rows ({args.prompts} prompts x {args.group_size}), {width} positions a row, {keep} completion, "
          f"{args.threads} threads, {args.repeats} repeats")  # fmt: skip
    for name, values in times.items():
        print(f"{name:>7}: forward+backward median {statistics.median(values):.3f} s (min {min(values):.3f})")
    ratio = statistics.median(times["trl"]) / statistics.median(times["prefix"])
    print(f"TRL / prefix: {ratio:.2f}x")


if __name__ == "__main__":
    main()
