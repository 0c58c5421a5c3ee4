"""The ART adapter: real ``art.Model``/``art.Trajectory``/``art.TrajectoryGroup`` objects,
rollouts through benchmax's engine against a scripted OpenAI-compatible server, and
ART's own preprocessing (``tokenize_trajectory_groups``) reading the result back.
No ART backend runs here: LocalBackend needs unsloth/vLLM and a GPU."""

from __future__ import annotations

import math
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import art
import orjson
import pytest
from adapter_env import LookupEnv, RankedLookupEnv, example
from art.preprocessing.tokenize import tokenize_trajectory_groups
from art.transformers import patches as art_patches
from openai.types.chat.chat_completion import Choice
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, masking_utils

from benchmax.testing import ScriptedServer
from benchmax.train.adapters.art import ARTRollouts

# openpipe-art 0.5.18 replaces transformers' mask preprocessing on import with a wrapper
# for an older signature, which breaks every later generate in this pytest process.
masking_utils._preprocess_mask_arguments = art_patches._preprocess_mask_arguments

CALL = {"tool_calls": [{"name": "lookup", "arguments": {"key": "France"}}]}


def scripted(*steps: dict) -> str:
    return f"capital of France\n#script: {orjson.dumps(list(steps)).decode()}"


@pytest.fixture
def server():
    with ScriptedServer(token_ids=True) as server:
        yield server


def policy(server: ScriptedServer) -> art.Model:
    return art.Model(name="policy", project="benchmax-test", inference_base_url=server.base_url, inference_api_key="k")


async def test_a_group_becomes_trajectories_with_trainable_choices_and_weighted_rewards(server):
    env = LookupEnv()
    rollouts = ARTRollouts(env, weights={"correct": 2.0, "used_tool": 0.5})
    try:
        group = await rollouts.group(policy(server), example(scripted(CALL, {"content": "It is Paris."})), n=2)
    finally:
        await rollouts.aclose()
    assert isinstance(group, art.TrajectoryGroup)
    assert len(group.trajectories) == 2 and not group.exceptions
    trajectory = group.trajectories[0]
    items = trajectory.messages_and_choices
    kinds = [type(item).__name__ if isinstance(item, Choice) else item["role"] for item in items]
    assert kinds == ["user", "Choice", "tool", "Choice"]
    answer = trajectory.messages_and_choices[3]
    assert answer.message.content == "It is Paris."
    assert [lp.token for lp in answer.logprobs.content] == [f"token_id:{ord(c) % 256}" for c in "It is Paris."]
    assert trajectory.messages_and_choices[1].message.tool_calls[0].function.name == "lookup"
    assert trajectory.reward == 2.0 + 0.5
    assert trajectory.metrics == {"correct": 1.0, "used_tool": 1.0, "scored": 1.0}
    assert trajectory.metadata["termination_reason"] == "finished"
    assert any("looked up France" in line for line in trajectory.logs)
    assert trajectory.tools[0]["function"]["name"] == "lookup"
    assert [m["role"] for m in trajectory.messages()] == ["user", "assistant", "tool", "assistant"]
    assert env.entered and sorted(env.entered) == sorted(env.exited)
    assert server.headers[0].get("Authorization") == "Bearer k"
    assert server.requests[0]["model"] == "policy"


async def test_group_rewards_reach_each_trajectory(server):
    rollouts = ARTRollouts(RankedLookupEnv())
    try:
        short = example(scripted({"content": "Paris"}))
        group = await rollouts.group(policy(server), short, n=2)
    finally:
        await rollouts.aclose()
    assert [t.metrics["shortest"] for t in group.trajectories] == [1.0, 1.0]
    assert [t.reward for t in group.trajectories] == [2.0, 2.0]


async def test_an_operational_failure_scores_zero_or_becomes_a_group_exception(server):
    broken = example(scripted({"content": "Paris"}), broken=True)
    kept = ARTRollouts(LookupEnv())
    dropped = ARTRollouts(LookupEnv(), drop_unscorable=True)
    try:
        zero = await kept.group(policy(server), broken, n=1)
        excluded = await dropped.group(policy(server), broken, n=1)
    finally:
        await kept.aclose()
        await dropped.aclose()
    assert zero.trajectories[0].reward == 0.0
    assert zero.trajectories[0].metadata["termination_reason"] == "context_error"
    assert zero.trajectories[0].metrics == {"scored": 0.0}
    assert excluded.trajectories == []
    assert "context_error" in excluded.exceptions[0].message


async def test_a_model_without_an_endpoint_is_refused_with_the_fix(server):
    rollouts = ARTRollouts(LookupEnv())
    try:
        with pytest.raises(ValueError, match="no inference_base_url"):
            await rollouts.group(art.Model(name="p", project="x"), example(), n=1)
    finally:
        await rollouts.aclose()


def word_tokenizer() -> PreTrainedTokenizerFast:
    words = ["[UNK]", "<|im_start|>", "<|im_end|>", "user", "assistant", "tool", *[f"w{i}" for i in range(300)]]
    words += ["capital", "of", "France", "Paris", "It", "is", "#script:"]
    tokenizer = Tokenizer(models.WordLevel({word: index for index, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", eos_token="<|im_end|>")
    fast.chat_template = (
        "{% for m in messages %}{{ '<|im_start|> ' + m['role'] + ' ' + (m['content'] or '') + ' <|im_end|> ' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|> assistant ' }}{% endif %}"
    )
    return fast


async def test_arts_own_tokenizer_trains_on_exactly_the_generated_token_ids(server):
    rollouts = ARTRollouts(LookupEnv())
    try:
        right = await rollouts.group(policy(server), example(scripted(CALL, {"content": "It is Paris."})), n=1)
        wrong = await rollouts.group(policy(server), example(scripted({"content": "Lyon"})), n=1)
    finally:
        await rollouts.aclose()
    group = art.TrajectoryGroup([*right.trajectories, *wrong.trajectories])
    results = list(
        tokenize_trajectory_groups(word_tokenizer(), [group], allow_training_without_logprobs=False, scale_rewards=True)
    )
    by_reward = {result.trajectory.reward: result for result in results}
    trained = by_reward[2.0]
    generated = [0] + [ord(c) % 256 for c in "It is Paris."]  # the tool-call turn has no text: one id
    masked = [token for token, mask in zip(trained.token_ids, trained.assistant_mask, strict=True) if mask]
    assert masked == generated
    assert [lp for lp, mask in zip(trained.logprobs, trained.assistant_mask, strict=True) if mask] == [-0.5] * len(
        generated
    )
    assert all(math.isnan(lp) for lp, mask in zip(trained.logprobs, trained.assistant_mask, strict=True) if not mask)
    assert trained.advantage > 0 > by_reward[0.0].advantage
