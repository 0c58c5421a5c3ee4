"""The rollout scope: one object, entered by the engine per rollout, read by every package that needs it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchmax.engine import Engine, EngineConfig
from benchmax.envs import (
    BaseEnv,
    Example,
    HoldClock,
    ListDataset,
    RolloutRequest,
    RolloutScope,
    canonical_example_id,
    current_scope,
    enter_scope,
    group_scope,
    rollout_scope,
)
from benchmax.envs.logging import _CURRENT_GROUP_RIDS, _CURRENT_ROLLOUT_ID, group_context, rollout_context
from benchmax.testing import ScriptedServer

SRC = Path(__file__).resolve().parents[2] / "src" / "benchmax"


class ScopeSpyEnv(BaseEnv):
    """Records the scope its tool and its reward see, and 0.2.x's view of the rollout id."""

    max_turns = 3

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, RolloutScope, str | None]] = []

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        self.seen.append(("tool", current_scope(), _CURRENT_ROLLOUT_ID.get()))
        return "pong"

    async def compute_reward(self, rollout):
        self.seen.append(("reward", current_scope(), _CURRENT_ROLLOUT_ID.get()))
        return {"ok": 1.0}


def _request(rollout_id: str, base_url: str) -> RolloutRequest:
    script = '[{"tool_calls": [{"name": "ping", "arguments": {}}]}, {"content": "done"}]'
    payload = {"prompt_messages": [{"role": "user", "content": f"q\n#script: {script}"}]}
    return RolloutRequest(rollout_id, Example(canonical_example_id(payload), payload), "scripted", base_url)


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_the_engine_runs_each_rollout_inside_its_own_scope(timeout):
    env = ScopeSpyEnv()
    with ScriptedServer() as server:
        engine = Engine(env, EngineConfig(rollout_timeout=timeout))
        try:
            result = await engine.run_group([_request("r0", server.base_url), _request("r1", server.base_url)])
        finally:
            await engine.aclose()
    assert [outcome.termination_reason for outcome in result.outcomes] == ["finished", "finished"]
    assert sorted((hook, scope.rollout_id, legacy) for hook, scope, legacy in env.seen) == [
        ("reward", "r0", "r0"),
        ("reward", "r1", "r1"),
        ("tool", "r0", "r0"),
        ("tool", "r1", "r1"),
    ]
    for _, scope, _ in env.seen:
        assert scope.engine is engine
        # The rollout's clock reaches the model client only when there is a deadline to pause.
        assert (scope.hold is None) == (timeout is None)
        assert scope.hold is None or isinstance(scope.hold, HoldClock)
    assert current_scope() == RolloutScope()


def test_the_0_2_x_context_names_are_views_of_the_one_scope():
    with rollout_context("r1"):
        assert current_scope().rollout_id == "r1" and _CURRENT_ROLLOUT_ID.get() == "r1"
        with group_context(["r1", "r2"]):
            assert current_scope() == RolloutScope(rollout_id="r1", group_ids=("r1", "r2"))
            assert _CURRENT_GROUP_RIDS.get() == ("r1", "r2")
        assert current_scope().group_ids is None
    token = _CURRENT_ROLLOUT_ID.set("direct")
    assert current_scope().rollout_id == "direct"
    _CURRENT_ROLLOUT_ID.reset(token)
    assert _CURRENT_ROLLOUT_ID.get() is None and current_scope() == RolloutScope()


def test_nested_scopes_keep_the_fields_they_do_not_name():
    with enter_scope(RolloutScope(rollout_id="outer", engine="e")), group_scope(["a"]), rollout_scope("inner"):
        assert current_scope() == RolloutScope(rollout_id="inner", group_ids=("a",), engine="e")
    assert current_scope() == RolloutScope()


def _context_vars(package: Path) -> set[str]:
    """Names bound at module level to a ``ContextVar(...)`` anywhere in ``package``."""
    names = set()
    for path in package.rglob("*.py") if package.is_dir() else [package]:
        for node in ast.parse(path.read_text()).body:
            target, value = (
                (node.target, node.value)
                if isinstance(node, ast.AnnAssign)
                else (node.targets[0], node.value)
                if isinstance(node, ast.Assign)
                else (None, None)
            )
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Call)
                and getattr(value.func, "id", None) == "ContextVar"
            ):
                names.add(target.id)
    return names


def test_no_context_var_is_imported_across_packages():
    """Ambient state crosses packages only as the rollout scope, read through ``current_scope()``."""
    packages = {path.name.removesuffix(".py"): _context_vars(path) for path in SRC.iterdir() if path.suffix != ".pyc"}
    crossing = []
    for path in SRC.rglob("*.py"):
        importer = path.relative_to(SRC).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("benchmax.")):
                continue
            owner = node.module.split(".")[1]
            if owner == importer:
                continue
            for alias in node.names:
                if alias.name in packages.get(owner, set()):
                    crossing.append(f"{path.relative_to(SRC)}:{node.lineno} imports {node.module}.{alias.name}")
    assert not crossing, crossing
