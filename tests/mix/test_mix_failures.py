"""Where mechanisms meet in a mixture: one env fails (its model calls, its reward, its tool, its rollout
context) and the other is untouched, in an eval, in ``EnvMix.run_group`` and in a rescore.

{failure kind in env b} x {eval, run_group, rescore}: b's rollouts end with the failure's reason,
a's are finished and scored with a's own component only, and the per-env figures count the failures
in b, none in a.

Env b holds one example (two rollouts): a third 500 in a row would be the endpoint's failure, not
the request's (``benchmax.client``'s gate holds requests through an outage), which is another test's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmax import open_run
from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import RolloutRequest, TerminationReason
from benchmax.mix import EnvMix, MemberSpec, MixSpec
from benchmax.runner import RunConfig, arescore, arun

ENV_CODE = '''
from contextlib import asynccontextmanager
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset
from benchmax.rewards import extract_completion_text

FAIL = {fail!r}
CALC = {{
    "type": "function",
    "function": {{
        "name": "calc",
        "description": "add two numbers",
        "parameters": {{"type": "object", "properties": {{"a": {{"type": "number"}}, "b": {{"type": "number"}}}}}},
    }},
}}


class {cls}(BaseEnv):
    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(Path(base_dir) / f"{{split}}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [CALC]

    async def run_tool(self, rollout_id, tool_name, **args):
        if FAIL == "tool":
            raise RuntimeError("{name}'s tool broke")
        return args.get("a", 0) + args.get("b", 0)

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        if FAIL == "context":
            raise RuntimeError("{name}'s context broke")
        yield

    async def compute_reward(self, rollout):
        if FAIL == "reward":
            raise RuntimeError("{name}'s reward broke")
        text = extract_completion_text(rollout.messages).strip()
        return {{"{name}_ok": float(text == rollout.example_args["answer"])}}
'''

TOOL_THEN_ANSWER = [{"tool_calls": [{"name": "calc", "arguments": {"a": 2, "b": 3}}]}, {"content": "5"}]
REASONS = {
    "model_error": TerminationReason.MODEL_ERROR,
    "reward": TerminationReason.REWARD_ERROR,
    "tool": TerminationReason.TOOL_ERROR,
    "context": TerminationReason.CONTEXT_ERROR,
}
ROWS = {"a": 2, "b": 1}
GROUP = 2


def _env(root: Path, name: str, *, fail: str | None, server_fails: bool = False) -> Path:
    """``root/NAME/env.py`` failing as ``fail`` says, with ``ROWS[name]`` examples that call the tool once;
    ``server_fails``: the scripted server answers every request for them with a 500."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    code = ENV_CODE.format(fail=fail if fail != "model_error" else None, cls=name.capitalize() + "Env", name=name)
    (directory / "env.py").write_text(code)
    script = [{"status": 500, "message": "upstream broke"}] if server_fails else TOOL_THEN_ANSWER
    lines = [
        json.dumps({
            "prompt_messages": [{"role": "user", "content": f"{name} question {index}\n#script: {json.dumps(script)}"}],
            "answer": "5",
        })
        for index in range(ROWS[name])
    ]  # fmt: skip
    for split in ("eval", "train"):
        (directory / f"{split}.jsonl").write_text("".join(line + "\n" for line in lines))
    return directory


def _engine() -> EngineConfig:
    return EngineConfig(retry=RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02))


def _check(outcomes: list[tuple[str, str, dict[str, float]]], kind: str) -> None:
    """``(env, reason, rewards)`` per rollout: b failed as ``kind`` fails, a finished and scored alone."""
    by_env: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for env, reason, rewards in outcomes:
        by_env.setdefault(env, []).append((reason, rewards))
    assert sorted(by_env) == ["a", "b"], by_env
    assert all(len(items) == ROWS[env] * GROUP for env, items in by_env.items()), by_env
    for reason, rewards in by_env["a"]:
        assert (reason, rewards) == (TerminationReason.FINISHED, {"a_ok": 1.0})
    for reason, rewards in by_env["b"]:
        assert reason == REASONS[kind], (reason, rewards)
        assert "a_ok" not in rewards and not any(rewards.values()), rewards


def _check_figures(run_dir: Path) -> None:
    with open_run(run_dir) as run:
        suite = {figures.env: figures for figures in run.suite()}
    assert suite["a"].failed == 0 and suite["a"].passed == suite["a"].rollouts == ROWS["a"] * GROUP
    assert suite["b"].failed == suite["b"].rollouts == ROWS["b"] * GROUP and suite["b"].passed == 0
    assert "b_ok" not in suite["a"].components and "a_ok" not in suite["b"].components


def _stored(run_dir: Path) -> list[tuple[str, str, dict[str, float]]]:
    with open_run(run_dir) as run:
        return [(r.env or "", r.termination_reason, dict(r.rewards)) for r in run.rollouts()]


def _config(tmp_path: Path, server, a: Path, b: Path, run_dir: Path) -> RunConfig:
    mix = MixSpec((MemberSpec("a", str(a)), MemberSpec("b", str(b))))
    return RunConfig(
        env="a+b", mix=mix, base_url=server.base_url, model="scripted", group_size=GROUP, run_dir=run_dir,
        max_failure_rate=1.0, engine=_engine(),
    )  # fmt: skip


@pytest.mark.parametrize("kind", sorted(REASONS))
async def test_eval_of_a_mixture_keeps_one_envs_failure_in_that_env(tmp_path, server, kind):
    a = _env(tmp_path / "envs", "a", fail=None)
    b = _env(tmp_path / "envs", "b", fail=kind, server_fails=kind == "model_error")

    await arun(_config(tmp_path, server, a, b, tmp_path / "run"))

    _check(_stored(tmp_path / "run"), kind)
    _check_figures(tmp_path / "run")


@pytest.mark.parametrize("kind", sorted(REASONS))
async def test_run_group_of_an_env_mix_keeps_one_envs_failure_in_that_env(tmp_path, server, kind):
    a = _env(tmp_path / "envs", "a", fail=None)
    b = _env(tmp_path / "envs", "b", fail=kind, server_fails=kind == "model_error")
    mix = await EnvMix.load(MixSpec((MemberSpec("a", str(a)), MemberSpec("b", str(b)))))
    outcomes: list[tuple[str, str, dict[str, float]]] = []
    try:
        for example in await mix.create_dataset("eval", tmp_path):
            requests = [
                RolloutRequest(f"{example.id}#{k}", example, "scripted", server.base_url, split="eval")
                for k in range(GROUP)
            ]
            for outcome in (await mix.run_group(requests)).values():
                assert outcome.example_id == example.id
                outcomes.append((str(example.env), outcome.termination_reason, dict(outcome.rewards)))
    finally:
        await mix.aclose()

    _check(outcomes, kind)


@pytest.mark.parametrize("kind", sorted(REASONS))
async def test_rescore_of_a_mixture_keeps_one_envs_failure_in_that_env(tmp_path, server, kind):
    a = _env(tmp_path / "envs", "a", fail=None)
    live = kind in ("model_error", "tool")  # failures of the live run: a rescore keeps them as stored
    b = _env(tmp_path / "envs", "b", fail=kind if live else None, server_fails=kind == "model_error")
    failing_b = _env(tmp_path / "failing", "b", fail=kind, server_fails=kind == "model_error")
    await arun(_config(tmp_path, server, a, b, tmp_path / "run"))
    asked = len(server.requests)

    rescored = await arescore(tmp_path / "run", env_specs={"b": str(failing_b)}, run_dir=tmp_path / "rescored")

    assert len(server.requests) == asked, "a rescore makes no model call"
    _check(_stored(rescored), kind)
    _check_figures(rescored)
    with open_run(tmp_path / "run") as run:
        source = {r.rollout_id: r for r in run.rollouts()}
    with open_run(rescored) as run:
        for rollout in run.rollouts():
            if rollout.env == "a":
                assert rollout.rewards == source[rollout.rollout_id].rewards, "a's scores are a's stored code's"
