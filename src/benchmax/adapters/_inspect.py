"""Inspect AI tasks as benchmax envs: ``inspect:PATH.py@TASK``.

An Inspect task is a dataset, a solver chain and scorers. The mapping onto
``BaseEnv`` is direct for the common shape, where the solvers only shape the
prompt and one ``generate()`` asks the model:

- each ``Sample`` is an example (its id, else its position from 1, as Inspect
  numbers samples);
- the solver chain (``setup`` first) runs on Inspect's own ``TaskState`` up to
  its ``generate`` call, without a model: what the state holds then is the
  example's ``prompt_messages``;
- benchmax's model loop is that ``generate``;
- scoring runs the chain again with a ``generate`` that hands back the rollout's
  answer (so solvers that read the answer, such as ``multiple_choice``, do their
  part), then each of the task's scorers on Inspect's ``TaskState`` and
  ``Target``; every score's value goes through Inspect's ``value_to_float`` (C/I/P/N,
  numbers, booleans) and becomes a reward component named as Inspect names the
  scorer (a dict value gives one component per key, ``scorer/key``).

What needs the model inside a solver (a second ``generate``, ``get_model()``,
an agent, tools) cannot be prepared ahead of the model loop: such a task is
refused when loaded, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchmax.adapters._extras import require
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

PREFIX = "inspect:"
MODEL_NAME = "benchmax/policy"
"""The model name Inspect's ``TaskState`` carries: the policy is whatever benchmax runs against."""

_STOP_REASONS = {
    TerminationReason.OUTPUT_EXCEEDED: "max_tokens",
    TerminationReason.CONTEXT_EXCEEDED: "model_length",
}
"""How a benchmax stop reads to Inspect's scorers (``ModelOutput.stop_reason``); others are ``"stop"``."""


class _ReachedGenerate(Exception):
    """Raised by the preparing ``generate``: the prompt is ready, the model's turn comes next."""

    def __init__(self, state: Any) -> None:
        super().__init__("generate")
        self.state = state


class _SolverNeedsModel(Exception):
    """A solver asked for the model a second time: not a prompt-then-generate task."""


@dataclass(frozen=True, slots=True)
class InspectTarget:
    """What ``inspect:`` names: a task file and, when it holds several, the task's name."""

    file: Path
    task: str | None

    @classmethod
    def parse(cls, spec: str) -> InspectTarget:
        rest = spec.removeprefix(PREFIX)
        file, _, task = rest.partition("@")
        if not file.endswith(".py"):
            raise EnvSpecError(f"{spec}: write inspect:PATH.py@TASK (or inspect:PATH.py when it holds one task)")
        path = Path(file)
        if not path.is_file():
            raise EnvSpecError(f"{spec}: no such file {path}")
        if task and not task.isidentifier():
            raise EnvSpecError(f"{spec}: {task!r} is not a task name (a Python identifier)")
        return cls(path.resolve(), task or None)


def inspect_env_class(spec: str) -> type[InspectEnv]:
    """An :class:`InspectEnv` class bound to the task ``spec`` names; ``--env-arg`` values are task arguments."""
    require("inspect_ai", spec)
    target = _resolved(InspectTarget.parse(spec), spec)
    name = f"Inspect_{target.task}"
    namespace = {"target": target, "spec": spec, "__module__": __name__}
    return type(name if name.isidentifier() else "InspectTask", (InspectEnv,), namespace)


class InspectEnv(BaseEnv):
    """One Inspect AI task (see the module doc); constructed with the task's own arguments."""

    max_turns = 1
    target: ClassVar[InspectTarget]
    spec: ClassVar[str] = ""

    def __init__(self, **task_args: Any) -> None:
        super().__init__()
        if not hasattr(self, "target"):
            raise EnvSpecError("InspectEnv is made from a spec: load inspect:PATH.py@TASK (benchmax.loading.EnvSpec)")
        require("inspect_ai", self.spec)
        self._task = _load_task(self.target, task_args, self.spec)
        self._solvers = _solver_steps(self._task)
        self._samples = list(self._task.dataset)
        if not self._samples:
            raise EnvSpecError(f"{self.spec}: the task's dataset has no samples")
        self._scorers = _scorers(self._task, self.spec)
        self._check_shape()

    def _check_shape(self) -> None:
        if getattr(self._task, "sandbox", None) is not None:
            raise EnvSpecError(
                f"{self.spec}: the task asks for a sandbox ({self._task.sandbox}); Inspect sandboxes are not "
                "mapped: run it with inspect eval, or give the task no sandbox"
            )

    async def _probe(self) -> None:
        """Prepare the first sample and replay it with an empty answer, so a task that needs the model
        inside its solvers is refused before any rollout, with the reason, rather than at its first reward."""
        state = await self._prepared(0)
        await self._replayed(0, "", "stop", [message_dict(m) for m in state.messages])

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> ListDataset:
        # An Inspect task has one dataset: both splits are it.
        count = len(self._samples) if max_examples is None else min(max_examples, len(self._samples))
        await self._probe()
        rows = []
        for index in range(count):
            state = await self._prepared(index)
            rows.append(
                Example(
                    str(sample_id(self._samples[index], index)),
                    {
                        "prompt_messages": [message_dict(m) for m in state.messages],
                        "inspect": {"index": index, "id": sample_id(self._samples[index], index)},
                    },
                )
            )
        return ListDataset(rows)

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap:
        from inspect_ai.scorer import Target, value_to_float

        index = self._sample_index(rollout.example_args)
        messages = list(rollout.messages)
        answered = bool(messages) and messages[-1].get("role") == "assistant"
        answer = messages[-1] if answered else {}
        prompt = messages[:-1] if answered else messages
        stop = _STOP_REASONS.get(str(rollout.termination_reason), "stop")
        state = await self._replayed(index, answer.get("content") or "", stop, prompt)
        target = Target(self._samples[index].target)
        to_float = value_to_float()
        rewards: dict[str, float] = {}
        for name, scorer in self._scorers:
            score = await scorer(state, target)
            if score is None:
                continue
            rewards.update(_components(name, score.value, to_float))
        return rewards

    def _sample_index(self, example_args: Mapping[str, Any]) -> int:
        ref = example_args.get("inspect") or {}
        index = ref.get("index")
        if not isinstance(index, int) or not 0 <= index < len(self._samples):
            raise EnvSpecError(f"{self.spec}: example refers to sample {ref!r}, which this task does not have")
        if sample_id(self._samples[index], index) != ref.get("id"):
            raise EnvSpecError(
                f"{self.spec}: sample {index} is now id {sample_id(self._samples[index], index)!r}, the rollout was "
                f"of id {ref.get('id')!r}: the task's dataset changed since the rollout was run"
            )
        return index

    def _state(self, index: int) -> Any:
        from inspect_ai._eval.task.util import sample_messages
        from inspect_ai.model import ModelName
        from inspect_ai.scorer import Target
        from inspect_ai.solver import TaskState

        sample = self._samples[index]
        return TaskState(
            model=ModelName(MODEL_NAME),
            sample_id=sample_id(sample, index),
            epoch=1,
            input=sample.input,
            target=Target(sample.target),
            choices=sample.choices,
            messages=sample_messages(sample),
            metadata=dict(sample.metadata or {}),
        )

    async def _prepared(self, index: int) -> Any:
        """The sample's ``TaskState`` as the solver chain leaves it when it asks for the model."""

        async def generate(state: Any, *args: Any, **kwargs: Any) -> Any:
            raise _ReachedGenerate(state)

        state = self._state(index)
        for position, solver in enumerate(self._solvers):
            try:
                state = await solver(state, generate)
            except _ReachedGenerate as reached:
                if reached.state.tools:
                    raise EnvSpecError(
                        f"{self.spec}: solver {position + 1} ({solver_name(solver)}) gives the model tools; Inspect "
                        "tools are not mapped (run it with inspect eval)"
                    ) from None
                return reached.state
            except EnvSpecError:
                raise
            except Exception as exc:
                raise EnvSpecError(self._needs_model(position, solver, exc)) from exc
        raise EnvSpecError(
            f"{self.spec}: the task's solvers never call generate(); benchmax runs the model where they do "
            "(add generate() to the task's solver)"
        )

    async def _replayed(self, index: int, answer: Any, stop_reason: str, prompt: Sequence[Mapping[str, Any]]) -> Any:
        """The sample's ``TaskState`` after the whole chain, its ``generate`` answering ``answer``."""
        from inspect_ai.model import ModelOutput

        calls = 0

        async def generate(state: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise _SolverNeedsModel
            if [message_dict(m) for m in state.messages] != [dict(m) for m in prompt]:
                which = sample_id(self._samples[index], index)
                raise EnvSpecError(
                    f"{self.spec}: the solvers built another prompt for sample {which!r} than the rollout had "
                    "(a solver that is not deterministic cannot be scored after the fact)"
                )
            state.output = ModelOutput.from_content(MODEL_NAME, _inspect_content(answer), stop_reason=stop_reason)
            state.messages.append(state.output.message)
            return state

        state = self._state(index)
        for position, solver in enumerate(self._solvers):
            try:
                state = await solver(state, generate)
            except EnvSpecError:
                raise
            except _SolverNeedsModel:
                raise EnvSpecError(self._needs_model(position, solver, None)) from None
            except Exception as exc:
                raise EnvSpecError(self._needs_model(position, solver, exc)) from exc
            if state.completed:
                break
        return state

    def _needs_model(self, position: int, solver: Any, exc: Exception | None) -> str:
        why = f" (it raised {type(exc).__name__}: {exc})" if exc is not None else " (it calls generate() again)"
        return (
            f"{self.spec}: solver {position + 1} ({solver_name(solver)}) needs the model itself{why}; benchmax "
            "runs Inspect tasks whose solvers shape the prompt and then generate() once. Tasks whose solvers or "
            "agents call the model themselves are not supported yet: run them with inspect eval"
        )


def sample_id(sample: Any, index: int) -> int | str:
    """The sample's id, or its position from 1 (what Inspect assigns a sample without one)."""
    return sample.id if sample.id is not None else index + 1


def solver_name(solver: Any) -> str:
    from inspect_ai._util.registry import is_registry_object, registry_unqualified_name

    return registry_unqualified_name(solver) if is_registry_object(solver) else getattr(solver, "__name__", "solver")


def _resolved(target: InspectTarget, spec: str) -> InspectTarget:
    """``target`` with its task named: the file's only task when the spec names none."""
    from inspect_ai import list_tasks

    names = [info.name for info in list_tasks(target.file.name, root_dir=target.file.parent)]
    if target.task is None:
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise EnvSpecError(f"{spec}: the file holds {len(names)} tasks ({listed}); name one as {spec}@TASK")
        return InspectTarget(target.file, names[0])
    if target.task not in names:
        listed = ", ".join(names) or "none"
        raise EnvSpecError(f"{spec}: no task {target.task!r} in {target.file} (its tasks: {listed})")
    return target


def _load_task(target: InspectTarget, task_args: Mapping[str, Any], spec: str) -> Any:
    """The task, loaded by Inspect's own loader (it imports the file from its directory, as ``inspect eval`` does)."""
    from inspect_ai._eval.loader import load_tasks

    try:
        (task,) = load_tasks([f"{target.file}@{target.task}"], dict(task_args))
    except TypeError as exc:
        raise EnvSpecError(f"{spec}: cannot create task {target.task}(**{dict(task_args)!r}): {exc}") from exc
    return task


def _solver_steps(task: Any) -> list[Any]:
    from inspect_ai.solver import Solver, chain

    steps: list[Any] = []
    for part in (task.setup, task.solver):
        if part is None:
            continue
        solver: Solver = chain(part) if isinstance(part, Sequence) else part
        steps.extend(solver if isinstance(solver, Sequence) else [solver])
    return steps


def _scorers(task: Any, spec: str) -> list[tuple[str, Any]]:
    """``(name, scorer)`` in the task's order, named as Inspect names them in its logs."""
    from inspect_ai.scorer._scorer import unique_scorer_name

    scorers = [scorer for scorer in (task.scorer or []) if scorer]
    if not scorers:
        raise EnvSpecError(f"{spec}: the task has no scorer; give it one (scorer=match(), ...) to score rollouts")
    names: list[str] = []
    for scorer in scorers:
        names.append(unique_scorer_name(scorer, names))
    return list(zip(names, scorers, strict=True))


def _components(name: str, value: Any, to_float: Any) -> dict[str, float]:
    """One score's value as reward components: a scalar is one, a dict or list one per entry."""
    if isinstance(value, Mapping):
        return {f"{name}/{key}": _finite(to_float(item)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return {f"{name}/{index}": _finite(to_float(item)) for index, item in enumerate(value)}
    return {name: _finite(to_float(value))}


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else 0.0


def message_dict(message: Any) -> dict[str, Any]:
    """An Inspect chat message as the OpenAI chat message Inspect's OpenAI provider sends."""
    content = message.content
    if not isinstance(content, str):
        content = [_content_part(part) for part in content]
    row: dict[str, Any] = {"role": message.role, "content": content}
    if message.role == "assistant" and message.tool_calls:
        raise EnvSpecError("Inspect messages with tool calls are not mapped (tools are not supported yet)")
    if message.role == "tool":
        raise EnvSpecError("Inspect tool messages are not mapped (tools are not supported yet)")
    return row


def _content_part(part: Any) -> dict[str, Any]:
    if part.type == "text":
        return {"type": "text", "text": part.text}
    if part.type == "image":
        return {"type": "image_url", "image_url": {"url": part.image}}
    raise EnvSpecError(f"Inspect content of type {part.type!r} is not mapped (text and images are)")


def _inspect_content(content: Any) -> Any:
    """The rollout's answer as Inspect content: a string, or Inspect's own content parts."""
    if content is None or isinstance(content, str):
        return content or ""
    from inspect_ai._util.content import ContentText

    return [ContentText(text=str(part.get("text", ""))) for part in content if part.get("type") == "text"]
