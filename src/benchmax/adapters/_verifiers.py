"""verifiers environments as benchmax envs: ``verifiers:TASKSET_ID``.

verifiers 0.4 (``verifiers.v1``) splits an environment into a *taskset* (tasks and their
``@vf.reward``/``@vf.metric`` methods, judges) and a *harness* (the program that talks to the
model). A taskset paired with verifiers' ``null`` harness and no tools is one chat
completion: the single-turn shape. The mapping onto ``BaseEnv``:

- the taskset is loaded by verifiers' own loader (``resolve_env_config``, ``load_taskset``),
  ``--env-arg taskset={...}`` being its config as ``--env.taskset.*`` gives it;
- each task is an example (its ``id``, else its position in ``load()``); ``prompt_messages``
  are what the ``null`` harness's chat program sends: the system prompt, then the prompt;
- benchmax's model loop is the harness's one completion;
- scoring builds verifiers' ``Trace`` from the transcript with verifiers' own code (the chat
  dialect parses the request and reply, ``graph.prepare_turn(...).commit`` records the turn, as
  its interception server does), then calls ``Task.score(trace)``. Each reward becomes a
  component holding its weighted value (``score * weight``), so the components sum to
  verifiers' ``trace.reward``.

What verifiers runs as its own program or episode is refused when the spec is loaded, with the
reason: an env class other than ``SingleAgentEnv`` (user simulators, several agents,
best-of-n: the env answers the model turn by turn), a taskset that bundles its own harness,
toolsets (MCP tools), container tasks, and rewards, metrics or hooks that need the task's
runtime.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from benchmax.adapters._extras import install_line, require
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    EnvSpecError,
    Example,
    ListDataset,
    RewardMap,
    TerminationReason,
)

PREFIX = "verifiers:"
_FINISH_REASONS = {
    TerminationReason.OUTPUT_EXCEEDED: "length",
    TerminationReason.CONTEXT_EXCEEDED: "length",
}
"""How a benchmax stop reads to verifiers (``ModelCall.finish_reason``, ``trace.is_truncated``)."""


def verifiers_env_class(spec: str) -> type[VerifiersEnv]:
    """A :class:`VerifiersEnv` class bound to the taskset ``spec`` names."""
    taskset_id = spec.removeprefix(PREFIX).strip()
    if not taskset_id:
        raise EnvSpecError(
            f"{spec}: write verifiers:TASKSET_ID (a taskset package verifiers can import, as --env.taskset.id names it)"
        )
    verifiers = require("verifiers", spec)
    try:
        importlib.import_module("verifiers.v1")
    except ModuleNotFoundError:
        raise EnvSpecError(
            f"{spec}: verifiers {getattr(verifiers, '__version__', '?')} is installed; this spec runs verifiers 0.4 "
            f"tasksets (verifiers.v1), and the older load_environment API is not mapped: {install_line('verifiers')}"
        ) from None
    return type("Verifiers", (VerifiersEnv,), {"taskset_id": taskset_id, "spec": spec, "__module__": __name__})


class VerifiersEnv(BaseEnv):
    """One verifiers taskset run as under its ``null`` harness (see the module doc)."""

    max_turns = 1
    taskset_id: ClassVar[str] = ""
    spec: ClassVar[str] = ""

    def __init__(self, *, taskset: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        vf = require("verifiers.v1", self.spec or PREFIX)
        from pydantic import ValidationError

        if taskset is not None and not isinstance(taskset, Mapping):
            raise EnvSpecError(f"{self.spec}: taskset must be a JSON object (the taskset's config), got {taskset!r}")
        try:
            self._config = vf.resolve_env_config({"taskset": {**dict(taskset or {}), "id": self.taskset_id}})
            env_class = vf.environment_class(self.taskset_id)
            harness = vf.default_harness_id(self.taskset_id)
        except ModuleNotFoundError as exc:
            raise EnvSpecError(f"{self.spec}: {exc}") from None
        except ValidationError as exc:
            raise EnvSpecError(f"{self.spec}: the taskset config does not validate: {exc}") from None
        from verifiers.v1.utils.loaders import taskset_class

        self._taskset_class = taskset_class(self.taskset_id)
        self._task_class = self._taskset_class.task_type()
        self._refuse_unmapped(vf, env_class, harness)

    def _refuse_unmapped(self, vf: Any, env_class: type, harness: str) -> None:
        where = self.spec
        if env_class is not vf.SingleAgentEnv:
            raise EnvSpecError(
                f"{where}: runs as {env_class.__name__}, an env that plays its own episode (the env answers the "
                "model turn by turn, or several agents play); benchmax maps single-turn verifiers envs only "
                "(SingleAgentEnv with the null harness)"
            )
        if harness == self.taskset_id:
            raise EnvSpecError(
                f"{where}: the taskset bundles its own harness, a program that talks to the model itself; benchmax "
                "maps tasksets that run under verifiers' null harness (one chat completion)"
            )
        tools = [
            *self._taskset_class.toolsets(self._config.taskset),
            *self._task_class.toolsets(self._config.taskset.task),
        ]
        if tools:
            names = ", ".join(type(tool).__name__ for tool in tools)
            raise EnvSpecError(
                f"{where}: the taskset gives the model tools ({names}); verifiers toolsets (MCP servers) are not "
                "mapped: the model would answer more than once"
            )
        if self._task_class.NEEDS_CONTAINER:
            raise EnvSpecError(f"{where}: its tasks need a container runtime, which benchmax does not provide for them")
        for hook in ("setup", "finalize", "stage_verifier"):
            if getattr(self._task_class, hook) is not getattr(vf.Task, hook):
                raise EnvSpecError(
                    f"{where}: {self._task_class.__name__}.{hook} works on the task's runtime, which benchmax does "
                    "not provide; only tasks scored from the transcript are mapped"
                )

    def _refuse_runtime_scoring(self, task: Any) -> None:
        """A reward or metric that needs the runtime would be skipped offline: refuse it instead."""
        needs = [
            fn.__name__
            for kind in ("reward", "metric")
            for fn in task.hooks(kind)
            if (param := inspect.signature(fn).parameters.get("runtime")) is not None
            and param.default is inspect.Parameter.empty
        ]
        if needs:
            raise EnvSpecError(
                f"{self.spec}: {', '.join(needs)} need(s) the task's runtime to score; benchmax scores from the "
                "transcript only"
            )

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> ListDataset:
        # A taskset has no splits: both are its tasks. load() may read files: keep it off the loop.
        return ListDataset(await asyncio.to_thread(self._examples, max_examples))

    def _examples(self, max_examples: int | None) -> list[Example]:
        from verifiers.v1.utils.loaders import load_taskset

        taskset = load_taskset(self._config.taskset)
        view = taskset.take(max_examples) if max_examples is not None else taskset
        if not view.bounded:
            raise EnvSpecError(f"{self.spec}: the taskset is endless; pass --max-examples to take that many tasks")
        rows = []
        for task in view:
            if not rows:
                self._refuse_runtime_scoring(task)
            data = task.data
            rows.append(
                Example(
                    str(data.id if data.id is not None else data.idx),
                    {
                        "prompt_messages": _prompt_messages(data),
                        "verifiers": {"data": data.model_dump(mode="json", exclude_none=True), "key": task.key},
                    },
                )
            )
        return rows

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap:
        task = self._task(rollout.example_args)
        trace = self._trace(task, rollout)
        await task.score(trace)
        return {name: reward.value for name, reward in trace.rewards.items() if reward is not None}

    def _task(self, example_args: Mapping[str, Any]) -> Any:
        ref = example_args.get("verifiers") or {}
        data = self._task_class.data_type().model_validate(ref.get("data") or {})
        task = self._task_class(data, self._config.taskset.task)
        if task.key != ref.get("key"):
            raise EnvSpecError(
                f"{self.spec}: task {data.id or data.idx} rebuilt from the rollout has key {task.key}, the rollout "
                f"was of {ref.get('key')}: the taskset's task class changed since the rollout was run"
            )
        return task

    def _trace(self, task: Any, rollout: BaseRollout) -> Any:
        """verifiers' ``Trace`` of this rollout, recorded as its interception server records one turn."""
        from verifiers.v1 import graph
        from verifiers.v1.configs.agent import agent_config_fields
        from verifiers.v1.dialects.chat import ChatDialect
        from verifiers.v1.state import state_cls
        from verifiers.v1.trace import AgentInfo, Trace, TraceTask

        agent = next(iter(agent_config_fields(self._config).values()))
        trace = Trace(
            task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            state=state_cls(type(task))(),
            agent=AgentInfo(config=agent),
        )
        dialect = ChatDialect()
        messages = [_wire(message) for message in rollout.messages]
        answered = bool(messages) and messages[-1].get("role") == "assistant"
        request = dialect.parse_request({"messages": messages[:-1] if answered else messages})
        turn = graph.prepare_turn(trace, request.messages, request.tools)
        if not answered:
            turn.commit_prompt()
            return trace
        finish = _FINISH_REASONS.get(TerminationReason(str(rollout.termination_reason)), "stop")
        raw = {
            "id": f"benchmax-{trace.id}",
            "object": "chat.completion",
            "created": 0,
            "model": "benchmax/policy",
            "choices": [{"index": 0, "message": messages[-1], "finish_reason": finish}],
        }
        response = dialect.parse_response(dialect.validate_response(raw))
        response.raw = raw
        turn.commit(response)
        return trace


def _prompt_messages(data: Any) -> list[dict[str, Any]]:
    """What the ``null`` harness's chat program sends: the system prompt, then the prompt."""
    from verifiers.v1.dialects.chat import message_to_wire

    messages: list[dict[str, Any]] = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    if isinstance(data.prompt, str):
        if data.prompt:
            messages.append({"role": "user", "content": data.prompt})
    elif data.prompt:
        messages.extend(message_to_wire(message) for message in data.prompt)
    return messages


def _wire(message: Mapping[str, Any]) -> dict[str, Any]:
    """A transcript message as the chat wire carries it (benchmax's own bookkeeping keys dropped)."""
    keep = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
    return {key: message[key] for key in keep if key in message and message[key] is not None}
