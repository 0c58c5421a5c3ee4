"""prime-rl / verifiers: a benchmax env as a verifiers v1 taskset plus harness.

verifiers (0.4, ``verifiers.v1``) splits an environment into a *taskset* (rows
and scoring) and a *harness* (the program that talks to the model). Every model
call of a harness must go through the rollout's interception endpoint, which
records the trace (and, under prime-rl, the tokens and logprobs). The harness
here runs benchmax's engine in-process against that endpoint, so
``rollout_context``, tools, termination reasons and log capture behave as in
``benchmax eval``; the task then records each reward component with its weight
(``trace.reward`` is their weighted sum).

Plugins are found by module id, and one module may export both halves. A user
module (say ``my_env_vf.py``, on the path where prime-rl or ``vf eval`` runs)::

    from benchmax.train.adapters.verifiers import BenchmaxHarness, BenchmaxTaskset
    __all__ = ["BenchmaxTaskset", "BenchmaxHarness"]

then ``--env.taskset.id my_env_vf --env.taskset.env examples/format``. Group
rewards are refused: verifiers scores each rollout on its own.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import verifiers.v1 as vf
from pydantic import Field

from benchmax.aio import block_on
from benchmax.engine import Engine
from benchmax.envs import BaseEnv, DatasetSplit, Example, RolloutRequest, StaticBearerAuth
from benchmax.train.adapters._common import (
    EXAMPLE_ID_KEY,
    PAYLOAD_KEY,
    components,
    example_fields,
    example_from_fields,
    refuse_group_rewards,
)

_ENVS: dict[str, BaseEnv] = {}
_REGISTERED: set[str] = set()
_ENGINES: dict[str, weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Engine]] = {}


def register_env(name: str, env: BaseEnv) -> None:
    """Make an env instance available to tasksets under ``env = name``.

    Without registration, ``env`` is read as a benchmax env spec (a path such as
    ``examples/format`` or ``module:Class``) and loaded once per process.
    """
    refuse_group_rewards(env, "verifiers")
    _ENVS[name] = env
    _REGISTERED.add(name)


def _env(name: str) -> BaseEnv:
    env = _ENVS.get(name)
    if env is None:
        from benchmax.loading import EnvSpec

        env = EnvSpec(name).load()
        refuse_group_rewards(env, "verifiers")
        _ENVS[name] = env
    return env


def _engine(name: str) -> Engine:
    """One engine per env and event loop: its HTTP sessions belong to the loop."""
    loop = asyncio.get_running_loop()
    engines = _ENGINES.setdefault(name, weakref.WeakKeyDictionary())
    engine = engines.get(loop)
    if engine is None:
        engine = engines[loop] = Engine(_env(name))
    return engine


class BenchmaxTaskData(vf.TaskData):
    """A verifiers task row carrying its benchmax example (payload as JSON text)."""

    benchmax_env: str
    benchmax_example_id: str
    benchmax_payload: str
    benchmax_split: DatasetSplit = "train"
    benchmax_weights: dict[str, float] = Field(default_factory=dict)


class BenchmaxTask(vf.Task[BenchmaxTaskData, vf.State, vf.TaskConfig]):
    """Records the rewards the engine computed during the harness run."""

    @property
    def key(self) -> str:
        return f"{self.data.benchmax_env}:{self.data.benchmax_example_id}"

    async def score(self, trace: vf.Trace, runtime: Any = None) -> None:
        await super().score(trace, runtime)
        rewards = (trace.info.get("benchmax") or {}).get("rewards")
        if not rewards:
            return
        weights = self.data.benchmax_weights
        for name, value in rewards.items():
            trace.record_reward(name, value, weights.get(name, 1.0))


class BenchmaxTasksetConfig(vf.TasksetConfig):
    env: str = ""
    """A name given to :func:`register_env`, or a benchmax env spec to load."""
    split: DatasetSplit = "train"
    max_examples: int | None = None
    weights: dict[str, float] = Field(default_factory=dict)
    """Weight per reward component (1.0 for components not named)."""


class BenchmaxTaskset(vf.Taskset[BenchmaxTask, BenchmaxTasksetConfig]):
    """The env's ``create_dataset(split)`` as verifiers tasks."""

    def load(self) -> Iterable[BenchmaxTask]:
        if not self.config.env:
            raise ValueError("BenchmaxTaskset needs --env.taskset.env: a registered env name or a benchmax env spec")
        env = _env(self.config.env)
        for example in _dataset(env, self.config.env, self.config.split, self.config.max_examples):
            fields = example_fields(example)
            data = BenchmaxTaskData(
                id=example.id,
                prompt=[dict(message) for message in example.payload["prompt_messages"]],
                benchmax_env=self.config.env,
                benchmax_example_id=fields[EXAMPLE_ID_KEY],
                benchmax_payload=fields[PAYLOAD_KEY],
                benchmax_split=self.config.split,
                benchmax_weights=self.config.weights,
            )
            yield BenchmaxTask(data, self.config.task)


class BenchmaxHarnessConfig(vf.HarnessConfig):
    pass


class BenchmaxHarness(vf.Harness[BenchmaxHarnessConfig]):
    """Runs the rollout with benchmax's engine, every model call through ``endpoint``."""

    APPENDS_SYSTEM_PROMPT: ClassVar[bool] = True
    EXECUTES_CODE: ClassVar[bool] = False
    NEEDS_CONTAINER: ClassVar[bool] = False

    async def launch(
        self,
        ctx: Any,
        trace: vf.Trace,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        **_: Any,
    ) -> vf.ProgramResult:
        if not isinstance(data, BenchmaxTaskData):
            raise TypeError(f"BenchmaxHarness runs BenchmaxTaskset tasks, got {type(data).__name__}")
        example = example_from_fields(
            {EXAMPLE_ID_KEY: data.benchmax_example_id, PAYLOAD_KEY: data.benchmax_payload}, where="verifiers task"
        )
        request = RolloutRequest(
            rollout_id=trace.id,
            example=example,
            model=ctx.model,
            base_url=endpoint,
            model_auth=StaticBearerAuth(secret),
            split=data.benchmax_split,
        )
        outcome = (await _engine(data.benchmax_env).run_group([request])).outcomes[0]
        trace.info["benchmax"] = {
            "rewards": components(outcome, data.benchmax_weights),
            "termination_reason": outcome.termination_reason,
            "error": outcome.error,
            "logs": [f"{log.level} {log.logger} [{log.phase} turn {log.turn}] {log.message}" for log in outcome.logs],
        }
        if not outcome.scored:
            raise RuntimeError(f"benchmax rollout ended {outcome.termination_reason}: {outcome.error}")
        last = next((m for m in reversed(outcome.messages) if m.get("role") == "assistant"), {})
        return vf.ProgramResult(exit_code=0, stdout=str(last.get("content") or ""), stderr="")


def _dataset(env: BaseEnv, name: str, split: DatasetSplit, max_examples: int | None) -> list[Example]:
    """``create_dataset`` from sync code that may sit inside a running loop (verifiers
    iterates tasksets from async code), so it runs on a thread of its own."""
    from benchmax.loading import EnvSpec

    base_dir = (None if name in _REGISTERED else EnvSpec(name).directory) or Path.cwd()

    async def examples() -> list[Example]:
        return list(await env.create_dataset(split, base_dir, max_examples=max_examples))

    return block_on(examples(), name="benchmax-vf-dataset")

