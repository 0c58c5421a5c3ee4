"""A mixture run through the runner: one engine per env on one client pool, groups routed by their env."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

from benchmax import open_run
from benchmax.envs import RolloutRequest
from benchmax.loading import EnvSpec
from benchmax.mix import EnvMix, MemberSpec, MixSpec
from benchmax.runner import LocalExecutor, RunConfig, arun


def _config(tmp_path: Path, server, mix: MixSpec, **options) -> RunConfig:
    options.setdefault("run_dir", tmp_path / "run")
    return RunConfig(
        env="a+b+c",
        mix=mix,
        base_url=server.base_url,
        model="scripted",
        **options,
    )


def _members(tmp_path: Path, trace: Path | None = None, rows=(3, 2, 1)) -> tuple[MemberSpec, ...]:
    kwargs = {"trace": str(trace)} if trace is not None else {}
    return tuple(
        MemberSpec(name, str(write_env(tmp_path / "envs", name, rows=count, component=f"ok_{name}")), env_kwargs=kwargs)
        for name, count in zip("abc", rows, strict=True)
    )


async def test_a_mixture_run_stores_every_envs_groups_under_namespaced_ids(tmp_path, server):
    trace = tmp_path / "trace.jsonl"
    config = _config(tmp_path, server, MixSpec(_members(tmp_path, trace)), group_size=2)

    result = await arun(config)

    assert result.verdict.ok and result.new_rollouts == 12
    with open_run(tmp_path / "run") as run:
        rollouts = list(run.rollouts())
        examples = run.examples()
        config_back = RunConfig.from_meta(run.run_meta.config)
    assert config_back.mix == config.mix, "the stored meta holds the mixture as given"
    assert Counter(example.id.split("/")[0] for example in examples) == {"a": 3, "b": 2, "c": 1}
    by_env = Counter(rollout.example_id.split("/")[0] for rollout in rollouts)
    assert by_env == {"a": 6, "b": 4, "c": 2}
    for rollout in rollouts:  # each env scored its own rollouts: its own component, right answers
        env = rollout.example_id.split("/")[0]
        assert {name: value for name, value in rollout.rewards.items() if value or name == f"ok_{env}"} == {
            f"ok_{env}": 1.0
        }
    seen = [json.loads(line) for line in trace.read_text().splitlines()]
    assert all("/" not in item[2] for item in seen if item[1] == "reward"), "hooks see the member's own ids"
    assert sorted(item[0] for item in seen if item[1] == "aclose") == ["a", "b", "c"], "every member closed"


async def test_the_executor_runs_every_member_on_one_client_pool_and_one_ledger(tmp_path, server):
    mix = await EnvMix.load(MixSpec(_members(tmp_path)))
    executor = LocalExecutor(mix)
    try:
        await executor.start()
        dataset = list(await mix.create_dataset("eval", tmp_path))
        for example in dataset:
            result = await executor.run_group(
                [RolloutRequest(f"{example.id}#0", example, "scripted", server.base_url, split="eval")]
            )
            assert [outcome.example_id for outcome in result.outcomes] == [example.id]
            assert result.calls is not None and sum(item.requests for item in result.calls.figures()) == 1
        assert {id(engine.clients) for engine, _ in executor._routes.values()} == {id(executor.clients)}
        assert sum(item.requests for item in executor.ledger.totals()) == len(dataset)
    finally:
        await executor.aclose()
        await mix.aclose()


async def test_a_member_with_a_bad_tool_is_named_before_any_rollout(tmp_path, server):
    members = _members(tmp_path)
    bad = tmp_path / "envs" / "b" / "env.py"
    tools = "    async def list_tools(self):\n        return [{'x': 1}]\n\n"
    bad.write_text(bad.read_text().replace("    async def compute_reward", tools + "    async def compute_reward"))
    with pytest.raises(Exception, match=r"env 'b': ") as caught:
        await arun(_config(tmp_path, server, MixSpec(members)))
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").glob("run.sqlite"))
    assert "tool" in str(caught.value).lower()


async def test_a_mixture_runs_on_ray_actors_as_it_runs_here(tmp_path, server, ray_cluster):
    members = _members(tmp_path)
    local = await arun(_config(tmp_path, server, MixSpec(members), group_size=2))
    remote = await arun(
        _config(tmp_path, server, MixSpec(members), group_size=2, executor="ray", workers=2, run_dir=tmp_path / "ray")
    )
    assert local.verdict.ok and remote.verdict.ok

    def stored(run_dir: Path) -> list[tuple[str, str, dict]]:
        with open_run(run_dir) as run:
            return sorted((r.rollout_id, r.example_id, dict(r.rewards)) for r in run.rollouts())

    assert stored(tmp_path / "ray") == stored(tmp_path / "run")
    assert Counter(example_id.split("/")[0] for _, example_id, _ in stored(tmp_path / "ray")) == {
        "a": 6,
        "b": 4,
        "c": 2,
    }


async def test_the_provenance_records_each_envs_code_and_data_and_a_resume_names_the_env_that_changed(
    tmp_path, server
):
    members = _members(tmp_path)
    await arun(_config(tmp_path, server, MixSpec(members)))
    with open_run(tmp_path / "run") as run:
        provenance = run.run_meta.provenance
    assert provenance is not None and provenance.env.kind == "mix"
    recorded = dict(provenance.members)
    assert list(recorded) == ["a", "b", "c"]
    for name, member in recorded.items():
        assert member.env.spec == str(tmp_path / "envs" / name)
        assert member.code.sha256 and member.data is not None
        assert [Path(item.path).name for item in member.data.files] == ["eval.jsonl"]
    assert recorded["a"].code.sha256 != recorded["b"].code.sha256

    code = tmp_path / "envs" / "b" / "env.py"
    code.write_text(code.read_text() + "\n# changed since the run started\n")
    data = tmp_path / "envs" / "c" / "eval.jsonl"
    data.write_text(data.read_text().replace("c question 0", "c question zero"))
    with pytest.raises(Exception, match="the dataset changed since this run started"):
        await arun(_config(tmp_path, server, MixSpec(members)), resume=True)
    with open_run(tmp_path / "run") as run:
        changes = run.run_meta.provenance_resumes[-1].changes
    assert [change.split(":")[0] for change in changes] == ["env 'b'", "env 'c'"], changes
    assert changes[0].startswith("env 'b': env code differs") and changes[1].startswith("env 'c': data differs")


def test_a_run_config_is_made_of_one_typed_env_or_mixture_and_gives_it_back():
    one = RunConfig.of(EnvSpec("pkg.env:Env", {"k": 1}))
    assert (one.env, dict(one.env_kwargs), one.mix) == ("pkg.env:Env", {"k": 1}, None)
    assert one.target == EnvSpec("pkg.env:Env", {"k": 1})
    mixture = MixSpec((MemberSpec("a", "./a"), MemberSpec("b", "./b")))
    mixed = RunConfig.of(mixture)
    assert (mixed.env, mixed.mix, mixed.target) == ("a+b", mixture, mixture)
