"""EnvMix as an env: its dataset (interleaved for eval, drawn by weight for training), routing, closing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from benchmax.envs import Environment, Example, RolloutRequest, ValidationDiagnostic
from benchmax.loading import EnvSpec
from benchmax.mix import EnvMix, MemberSpec, MixError, MixMember, MixSpec


async def _mix(envs, *, weights=(1.0, 1.0, 1.0), seed=0, rows=(3, 2, 1), max_examples=(None, None, None), **kw):
    specs = [
        MemberSpec(name, str(envs(name, rows=count)), weight=weight, max_examples=limit, env_kwargs=kw)
        for name, weight, count, limit in zip(("a", "b", "c"), weights, rows, max_examples, strict=True)
    ]
    return await EnvMix.load(MixSpec(tuple(specs), seed=seed))


async def test_eval_holds_every_members_examples_interleaved_under_namespaced_ids(envs, tmp_path):
    mix = await _mix(envs)
    assert isinstance(mix, Environment)
    dataset = await mix.create_dataset("eval", tmp_path)
    examples = list(dataset)
    answers = [example.payload["answer"] for example in examples]
    assert answers == ["a0", "b0", "c0", "a1", "b1", "a2"]
    assert [example.env for example in examples] == ["a", "b", "c", "a", "b", "a"]
    # the payload is the member's own, unchanged; the id is the member's id under its env's name
    member = mix.member("b")
    own = list(await member.env.create_dataset("eval", member.data_dirs[0]))
    assert examples[1].payload == own[0].payload
    assert examples[1].id == f"b/{own[0].id}"
    assert len({example.id for example in examples}) == len(examples)
    assert dataset[4] == examples[4] and dataset.env_counts() == {"a": 3, "b": 2, "c": 1}
    assert len(await mix.create_dataset("eval", tmp_path, max_examples=4)) == 4


async def test_per_env_max_examples_caps_each_member(envs, tmp_path):
    mix = await _mix(envs, rows=(5, 5, 5), max_examples=(1, None, 2))
    counts = Counter(example.env for example in await mix.create_dataset("eval", tmp_path))
    assert counts == {"a": 1, "b": 5, "c": 2}


async def test_the_training_draw_follows_the_weights_and_the_seed(envs, tmp_path):
    async def draw(seed: int, weights=(3.0, 1.0, 0.0)) -> list[str]:
        mix = await _mix(envs, rows=(20, 20, 20), weights=weights, seed=seed)
        return [example.id for example in await mix.create_dataset("train", tmp_path)]

    first = await draw(1)
    assert first == await draw(1), "the same seed draws the same order"
    assert first != await draw(2), "another seed draws another order"
    envs_drawn = Counter(example_id.split("/")[0] for example_id in first)
    assert len(first) == 40, "as many draws as the members with a weight hold examples"
    assert envs_drawn["c"] == 0, "a weight of 0 is never drawn"
    assert envs_drawn["a"] > envs_drawn["b"] > 0
    # the weights are relative: scaling all of them draws exactly the same
    assert first == await draw(1, weights=(0.3, 0.1, 0.0))


async def test_a_member_drawn_more_than_it_has_repeats_its_examples(envs, tmp_path):
    mix = await _mix(envs, rows=(2, 2, 2), weights=(1.0, 0.0, 0.0))
    drawn = await mix.create_dataset("train", tmp_path, max_examples=6)
    assert Counter(example.payload["answer"] for example in drawn) == {"a0": 3, "a1": 3}


async def test_each_group_runs_on_its_member_with_the_members_own_example(envs, tmp_path, server):
    trace = tmp_path / "trace.jsonl"
    mix = await _mix(envs, trace=str(trace))
    examples = list(await mix.create_dataset("eval", tmp_path))
    try:
        for example in examples[:3]:
            requests = [
                RolloutRequest(f"{example.id}#{k}", example, "scripted", server.base_url, split="eval")
                for k in range(2)
            ]
            outcomes = await mix.run_group(requests)
            assert set(outcomes) == {request.rollout_id for request in requests}
            for outcome in outcomes.values():
                assert outcome.example_id == example.id, "outcomes carry the mixture's example id"
                assert outcome.rewards == {"correct": 1.0}
        attempt = await mix.run_rollout(
            RolloutRequest("single", examples[5], "scripted", server.base_url, split="eval")
        )
        assert attempt.rewards == {"correct": 1.0}
    finally:
        await mix.aclose()
    seen = [json.loads(line) for line in trace.read_text().splitlines()]
    rewards = [item for item in seen if item[1] == "reward"]
    member_ids = {example.id: example.id.split("/", 1)[1] for example in examples}
    assert sorted((env, example_id) for env, _, example_id, _ in rewards) == sorted(
        [(example.env, member_ids[example.id]) for example in examples[:3] for _ in range(2)]
        + [(examples[5].env, member_ids[examples[5].id])]
    ), "every hook saw its own env's example id, not the mixture's"
    assert sorted(item[0] for item in seen if item[1] == "aclose") == ["a", "b", "c"]


async def test_a_group_of_an_example_from_no_member_is_refused(envs, tmp_path, server):
    mix = await _mix(envs)
    try:
        stray = Example("zzz/1", {"prompt_messages": [{"role": "user", "content": "x"}]}, "zzz")
        with pytest.raises(MixError, match="'zzz' is not from this mixture"):
            await mix.run_group([RolloutRequest("r", stray, "scripted", server.base_url)])
    finally:
        await mix.aclose()


async def test_aclose_closes_every_member_even_when_one_fails(envs, tmp_path):
    trace = tmp_path / "trace.jsonl"
    specs = (
        MemberSpec("a", str(envs("a")), env_kwargs={"trace": str(trace), "fail_close": True}),
        MemberSpec("b", str(envs("b")), env_kwargs={"trace": str(trace)}),
    )
    mix = await EnvMix.load(MixSpec(specs))
    with pytest.raises(MixError, match=r"env 'a': RuntimeError: a would not close"):
        await mix.aclose()
    assert [json.loads(line)[0] for line in trace.read_text().splitlines()] == ["a", "b"]


class _Flaky(Environment[dict, object]):
    def __init__(self, unavailable: str | None) -> None:
        self._unavailable = unavailable

    @property
    def unavailable(self) -> str | None:
        return self._unavailable

    def validation_diagnostics(self):
        return (ValidationDiagnostic("warning", "w1", "looks odd", "env.py:3"),)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return []

    async def run_rollout(self, request):
        raise AssertionError("not run")


def test_unavailable_and_diagnostics_name_the_env():
    mix = EnvMix([MixMember("up", _Flaky(None)), MixMember("down", _Flaky("server gone"))])
    assert mix.unavailable == "env 'down': server gone"
    assert [(item.code, item.message, item.location) for item in mix.validation_diagnostics()] == [
        ("w1", "env 'up': looks odd", "env.py:3"),
        ("w1", "env 'down': looks odd", "env.py:3"),
    ]


async def test_a_member_without_data_names_its_env(envs, tmp_path):
    directory = envs("a")
    (directory / "eval.jsonl").unlink()
    mix = await EnvMix.load(MixSpec((MemberSpec("a", str(directory)), MemberSpec("b", str(envs("b"))))))
    with pytest.raises(FileNotFoundError, match=r"env 'a': .*found no data"):
        await mix.create_dataset("eval", tmp_path)


async def test_a_member_built_in_python_reads_the_data_beside_its_class(envs, tmp_path):
    member = MemberSpec("a", str(envs("a"))).load()
    env = EnvSpec(str(envs("b"))).load()
    mix = EnvMix([MixMember("a", member.env), MixMember("b", env, weight=2)])
    assert Counter(example.env for example in await mix.create_dataset("eval", Path("/nonexistent"))) == {
        "a": 3,
        "b": 3,
    }


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ((("a", -1.0),), r"env 'a': weight -1.0 is not a finite number >= 0"),
        ((("a", float("nan")),), r"env 'a': weight nan is not a finite number >= 0"),
        ((("a", "0.5"),), r"env 'a': weight '0.5' is not a finite number >= 0"),
        ((("a", 0.0), ("b", 0.0)), r"the weights of a, b sum to 0"),
        ((("a", 1.0), ("a", 1.0)), r"two envs are named 'a'.*give each its own name"),
        ((("a b", 1.0),), r"'a b' is not a usable env name"),
        ((), r"a mixture needs at least one env"),
    ],
    ids=["negative", "nan", "string", "zero-sum", "same-name", "bad-name", "empty"],
)
def test_bad_mixtures_are_refused_naming_the_env(members, message):
    with pytest.raises(MixError, match=message):
        MixSpec(tuple(MemberSpec(name, "examples/format", weight=weight) for name, weight in members))


def test_an_env_that_fails_to_load_is_named(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "env.py").write_text("raise ImportError('no such thing')\n")
    with pytest.raises(MixError, match=r"env 'b' \(.*broken\) failed to load: .*env.py:1: importing it raised"):
        MemberSpec("b", str(broken)).load()


def test_the_spec_round_trips_through_json(tmp_path):
    spec = MixSpec(
        (
            MemberSpec("a", "examples/format", 0.5, {"k": [1]}, 3, tmp_path),
            MemberSpec("b", "examples/math", 2.0),
        ),
        seed=7,
    )
    assert MixSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_route_hands_a_group_to_the_env_its_examples_name_and_unroute_takes_its_outcomes_back():
    from benchmax.envs import RolloutOutcome

    mix = EnvMix([MixMember("up", _Flaky(None)), MixMember("down", _Flaky(None))])
    example = Example("down/q1", {"x": 1}, env="down")
    requests = [RolloutRequest(f"eval/down/q1#{sample}", example, "m", "http://x") for sample in range(2)]

    member, routed = mix.route(requests)

    assert member.name == "down"  # the typed field names the env, not the id's prefix
    assert [(request.rollout_id, request.example.id, request.example.env) for request in routed] == [
        ("eval/down/q1#0", "q1", None),
        ("eval/down/q1#1", "q1", None),
    ]
    outcome = RolloutOutcome(rewards={}, termination_reason="finished", rollout_id="eval/down/q1#0", example_id="q1")
    assert mix.unroute(outcome, requests).example_id == "down/q1"
    with pytest.raises(MixError, match=r"example 'up/q1' of env 'down' has no 'down/' prefix"):
        mix.route([RolloutRequest("r", Example("up/q1", {}, env="down"), "m", "http://x")])
