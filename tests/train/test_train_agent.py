"""``benchmax train`` on an agent program: the in-process policy answers the agent's calls
through the recording proxy, and every token trained on is a token the proxy served."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import pytest
import torch
from agent_env import SUB_PROMPT, TinyAgentEnv, agent_bridge, check_sequences_as_served

from benchmax.envs import TurnRecord
from benchmax.store import Run
from benchmax.train import build, run
from benchmax.train._policy import InProcessPolicy
from benchmax.train._tokens import render_prompt

Row = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""A training row: its prompt ids, its completion ids, the completion ids the loss trains on."""


def _rows(batch: dict[str, Any]) -> list[Row]:
    """TRL's padded batch back to its rows, padding dropped by the masks."""
    rows = []
    for row in range(batch["prompt_ids"].size(0)):
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()]
        kept = batch["completion_mask"][row].bool()
        completion = batch["completion_ids"][row][kept]
        trained = batch["completion_ids"][row][kept & batch["tool_mask"][row].bool()]
        rows.append((tuple(prompt.tolist()), tuple(completion.tolist()), tuple(trained.tolist())))
    return rows


def _served(turns: tuple[TurnRecord, ...]) -> list[Row]:
    """The rows a rollout's stored turns make, one per sequence: the sequence's first prompt, then
    everything after it up to its last completion, of which the completions are trained on."""
    rows = []
    for number in sorted({turn.sequence for turn in turns}):
        calls = [turn for turn in turns if turn.sequence == number]
        for earlier, later in pairwise(calls):
            stream = list(earlier.prompt_token_ids or ()) + list(earlier.completion_token_ids or ())
            assert list(later.prompt_token_ids or ())[: len(stream)] == stream, "a call was re-rendered"
        prompt = tuple(calls[0].prompt_token_ids or ())
        stream = tuple(calls[-1].prompt_token_ids or ()) + tuple(calls[-1].completion_token_ids or ())
        generated = tuple(token for turn in calls for token in turn.completion_token_ids or ())
        rows.append((prompt, stream[len(prompt) :], generated))
    return rows


@pytest.mark.parametrize(
    ("sub", "passes", "beta"),
    [(False, 1, 0.0), (True, 1, 0.0), (True, 2, 0.04)],
    ids=["one-sequence", "sub-agent", "sub-agent-two-passes-kl"],
)
def test_an_agent_program_trains_on_exactly_the_tokens_the_proxy_served(tiny_model_dir, tmp_path, sub, passes, beta):
    """Two passes per batch and a KL term make TRL compute old and reference logprobs per row:
    the rows of further sequences get them too, as a forward pass over the whole batch gives them."""
    torch.manual_seed(0)
    session = build(
        TinyAgentEnv(sub=sub),
        model=str(tiny_model_dir),
        run_dir=tmp_path / "run",
        group_size=2,
        prompts_per_step=2,
        max_tokens=6,
        max_steps=2,
        learning_rate=1e-3,
        seed=0,
        async_steps=0,
        beta=beta,
        trl_args={"num_iterations": passes},
    )
    trainer = session.trainer
    scored: list[tuple[Any, dict[str, Any]]] = []
    trained: list[dict[str, Any]] = []
    score, loss = trainer._generate_and_score_completions, trainer._compute_loss

    def spy_score(inputs: Any) -> dict[str, Any]:
        output = score(inputs)
        scored.append((session.bridge.last, output))
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        width, kept = output["completion_ids"].size(1), output["completion_mask"].bool()
        for key, model in (("old_per_token_logps", trainer.model), ("ref_per_token_logps", trainer.ref_model)):
            assert (key in output) == (passes > 1 if key.startswith("old") else beta > 0)
            if key in output:
                with torch.no_grad():
                    whole = trainer._get_per_token_logps_and_entropies(model, ids, mask, width)[0]
                assert torch.allclose(output[key][kept], whole[kept], atol=1e-4), key
        return output

    def spy_loss(model: Any, inputs: dict[str, Any]) -> Any:
        trained.append(dict(inputs))  # as handed to the loss (which weighs the advantages in place)
        return loss(model, inputs)

    trainer._generate_and_score_completions, trainer._compute_loss = spy_score, spy_loss
    try:
        result = run(session)
    finally:
        session.close()
    assert result.steps == 2
    with Run(result.run_dir) as stored:
        served = {rollout.rollout_id: rollout.turns for rollout in stored.rollouts() if rollout.split == "train"}

    assert len(trained) == 2 and len(scored) == 2 // passes
    for index, inputs in enumerate(trained):
        batch, output = scored[index // passes]
        assert [check.status for check in batch.checks] == ["ok"] * len(batch.outcomes)
        turns = [served[outcome.rollout_id] for outcome in batch.outcomes]
        assert all(turn.prompt_token_ids and turn.completion_token_ids for rollout in turns for turn in rollout)
        expected = [_served(rollout) for rollout in turns]
        # TRL's rows: each rollout's first sequence, then each rollout's further sequences
        order = [rows[0] for rows in expected] + [row for rows in expected for row in rows[1:]]
        owners = list(range(len(expected))) + [i for i, rows in enumerate(expected) for _ in rows[1:]]
        assert _rows(output) == order
        advantages = output["advantages"].tolist()
        assert [advantages[owner] for owner in owners] == advantages
        # the loss sees the same rows (shuffled) with the same advantages
        pairs = zip(_rows(inputs), inputs["advantages"].tolist(), strict=True)
        assert Counter(pairs) == Counter(zip(order, advantages, strict=True))
        assert int(inputs["num_items_in_batch"]) == sum(len(row[2]) for row in order)
        if sub:
            assert all([turn.sequence for turn in rollout] == [0, 1, 0] for rollout in turns)
            assert len(order) == 2 * len(turns)
            fresh = render_prompt(session.tokenizer, [{"role": "user", "content": SUB_PROMPT}], None)
            assert all(list(rollout[1].prompt_token_ids or ()) == fresh for rollout in turns)
        else:
            assert all([turn.sequence for turn in rollout] == [0, 0] for rollout in turns)
            assert len(order) == len(turns)


def test_the_in_process_policy_keeps_a_token_state_per_sequence(tiny):
    model, tokenizer = tiny
    policy = InProcessPolicy(model, tokenizer, default_max_tokens=6)
    bridge, prompts, env = agent_bridge(policy, tokenizer)
    torch.manual_seed(0)
    try:
        output = bridge.generate(prompts, group_size=2, step=0)
    finally:
        bridge.loop.run(env.aclose())
        bridge.loop.run(bridge.engine.aclose())
        bridge.loop.close()
        policy.close()
    check_sequences_as_served(bridge, output, tokenizer)
