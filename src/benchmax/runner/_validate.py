"""``benchmax validate``: every problem of an env, each with its location, before a real run.

No model is needed: besides loading the env, reading both splits and checking the
tool declarations, validate runs the env's own hooks on a synthetic finished
rollout of each example it reads (inside ``rollout_context``, as the engine
would), so a reward that reads a field the data lacks, returns a string, or was
written without ``async`` shows up here rather than in the middle of a run. It also calls each declared tool once with
placeholder arguments that its schema accepts: a ``run_tool`` that raises anything
but ``ToolError`` would end a real rollout as ``tool_error`` whatever the model sent.
With ``--base-url`` it also runs one real group.

Every problem found in code is reported at ``FILE:LINE`` (the hook's ``def``, the
attribute's assignment, or the class), data problems at the data file's line, and
a problem that every synthetic rollout shares is reported once, naming them all.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.auth import ModelAuth, StaticBearerAuth, redact_url, split_credentials
from benchmax.engine import Engine, EngineConfig, validate_tools
from benchmax.envs import (
    CHAT_ROLES,
    SPLITS,
    BaseEnv,
    BaseRollout,
    DatasetError,
    EnvDefinitionError,
    Environment,
    EnvSpecError,
    Example,
    RolloutFailure,
    RolloutRequest,
    TerminationReason,
    Tool,
    ToolError,
    check_env_definition,
    check_prompt_messages,
    collect_dataset_problems,
    implements,
    to_example,
)
from benchmax.loading import EnvSpec, data_directories, example_location, locate_dataset
from benchmax.runner._validate_tools import ToolSets

_HOOKS = ("create_dataset", "compute_reward", "compute_group_rewards", "list_tools", "tools_for", "run_tool", "aclose")
_SYNTHETIC_ANSWER = "benchmax validate: a synthetic final answer"


@dataclass(frozen=True, slots=True)
class Problem:
    where: str
    message: str


@dataclass(slots=True)
class Report:
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    loaded: bool = False
    """Whether the env could be loaded and constructed (else nothing else was checked)."""
    found: bool = True
    """Whether ENV names something to check: a file or directory, an importable module, an
    installed env. When it names nothing the command line is wrong, not an env."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))


async def validate_env(
    spec: EnvSpec,
    *,
    data_dir: Path | None = None,
    max_examples: int = 5,
    base_url: str | None = None,
    model: str = "default",
    api_key_env: str | None = None,
    call_tools: bool = True,
) -> Report:
    """Every problem found by loading the env, reading both splits and running its hooks.

    ``call_tools``: call each declared tool once with placeholder arguments (see the module).
    """
    report = Report()
    try:
        cls = spec.load_class()
    except EnvSpecError as exc:
        report.problem(spec.spec, str(exc))
        report.found = _names_something(spec)
        return report
    source = getattr(sys.modules.get(cls.__module__), "__file__", None)
    where = f"{source}:{cls.__qualname__}" if source else f"{cls.__module__}.{cls.__qualname__}"
    _check_async_hooks(cls, where, report)
    try:
        env = cls(**dict(spec.kwargs))
    except EnvDefinitionError as exc:
        report.problem(_definition_at(cls, str(exc)) or where, str(exc))
        return report
    except Exception as exc:
        report.problem(where, f"constructing it raised {type(exc).__name__}: {exc}{_frame(exc)}")
        return report
    report.notes.append(f"loaded {where}")
    report.loaded = True
    try:
        for diagnostic in env.validation_diagnostics():
            target = report.problem if diagnostic.severity == "error" else None
            text = f"{diagnostic.code}: {diagnostic.message}"
            location = diagnostic.location or code_at(type(env)) or where
            if target is not None:
                target(location, text)
            else:
                report.warnings.append(f"{location}: {text}")
        if isinstance(env, BaseEnv):
            await _check_base_env(env, where, report)
        places = data_directories(spec, data_dir)
        examples: dict[str, list[Example[Any]]] = {}
        labels: dict[int, str] = {}
        for split in SPLITS:
            examples[split] = await _check_split(env, split, places, max_examples, where, report, labels)
        if isinstance(env, BaseEnv) and not any(p.message.startswith("hook ") for p in report.problems):
            tool_sets = (
                ToolSets(env, code_at(cls, "tools_for") or f"{where}.tools_for")
                if implements(env, "tools_for")
                else None
            )
            context_works = await _check_hooks(env, examples, report, tool_sets, labels)
            if tool_sets is not None:
                tool_sets.report(report.problem, report.notes)
            if call_tools and context_works:
                sample = next((found[0] for found in examples.values() if found), None)
                if tool_sets is not None:
                    await _check_tool_calls(env, list(tool_sets.valid.values()), report)
                elif sample is not None:
                    await _check_tool_calls(env, [(sample, None)], report)
        if base_url and isinstance(env, BaseEnv) and report.ok:
            sample = (examples.get("eval") or examples.get("train") or [None])[0]
            if sample is not None:
                await _check_group(env, sample, base_url, model, api_key_env, where, report)
    finally:
        try:
            await env.aclose()
        except Exception as exc:
            report.problem(f"{where}.aclose", f"raised {type(exc).__name__}: {exc}")
    return report


def _names_something(spec: EnvSpec) -> bool:
    """Whether ``spec`` names code that exists (then a failure to load it is the code's problem)."""
    if spec.remote:
        return False  # nothing answered there that could be checked
    path = spec.spec.rpartition(":")[0] if re.search(r":\w+$", spec.spec) and len(spec.spec) > 2 else spec.spec
    if Path(path).exists() or Path(spec.spec).exists():
        return True
    try:
        if spec.installed() is not None:
            return True
    except EnvSpecError:
        return True  # it names an installed env, of another version or beside a directory
    try:
        return importlib.util.find_spec(path) is not None
    except (ImportError, ValueError):
        return False


def _check_async_hooks(cls: type[Environment[Any, Any]], where: str, report: Report) -> None:
    """The engine awaits every hook: one written with ``def`` instead of ``async def`` fails at run time."""
    for hook in _HOOKS:
        if not implements(cls, hook):
            continue
        function = inspect.unwrap(getattr(cls, hook))
        if inspect.iscoroutinefunction(function):
            continue
        try:
            line = inspect.getsourcelines(function)[1]
            at = f"{inspect.getsourcefile(function)}:{line}"
        except (OSError, TypeError):
            at = where
        report.problem(at, f"hook {hook} must be defined with `async def` (benchmax awaits it)")
    context = cls.__dict__.get("rollout_context") if implements(cls, "rollout_context") else None
    if context is not None and (inspect.isasyncgenfunction(context) or inspect.iscoroutinefunction(context)):
        report.problem(
            code_at(cls, "rollout_context") or f"{where}.rollout_context",
            "hook rollout_context must be an async context manager: decorate it with @asynccontextmanager and `yield`",
        )


async def _check_base_env(env: BaseEnv, where: str, report: Report) -> None:
    cls = type(env)
    try:
        check_env_definition(env)
    except EnvDefinitionError as exc:
        report.problem(_definition_at(cls, str(exc)) or where, str(exc))
    at = code_at(cls, "list_tools") or f"{where}.list_tools"
    try:
        tools = validate_tools(await env.list_tools(), owner=cls.__name__)
    except EnvDefinitionError as exc:
        report.problem(at, str(exc))
        return
    except Exception as exc:
        report.problem(at, f"{cls.__name__}.list_tools() raised {type(exc).__name__}: {exc}{_frame(exc)}")
        return
    for name, tool in tools.items():
        parameters = tool["function"].get("parameters") or {}
        properties = parameters.get("properties") or {}
        missing = [key for key in parameters.get("required") or () if key not in properties]
        if missing:
            report.problem(
                at,
                f"{cls.__name__}.list_tools(): tool {name!r} requires {missing}, which its parameters' "
                "properties do not declare",
            )
    report.notes.append(f"{len(tools)} tool{'' if len(tools) == 1 else 's'}: {', '.join(tools) or 'none'}")


def code_at(cls: type, name: str | None = None) -> str | None:
    """``FILE:LINE`` where ``cls`` defines ``name`` (a method's ``def``, an attribute's assignment).

    Without ``name``, or when the env inherits it from benchmax (a ``max_turns`` never
    set), the line of the ``class`` statement: where the author would add it.
    """
    for owner in cls.__mro__ if name else ():
        if name not in vars(owner):
            continue
        if _is_benchmax(owner):
            break
        value = inspect.unwrap(vars(owner)[name]) if callable(vars(owner)[name]) else None
        if value is not None:
            try:
                return f"{inspect.getsourcefile(value)}:{inspect.getsourcelines(value)[1]}"
            except (OSError, TypeError):
                pass
        try:
            lines, start = inspect.getsourcelines(owner)
            source = inspect.getsourcefile(owner)
        except (OSError, TypeError):
            break
        assigned = re.compile(rf"\s+{re.escape(name)}\s*[:=]")
        for offset, text in enumerate(lines):
            if assigned.match(text):
                return f"{source}:{start + offset}"
        break
    try:
        return f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        return None


def _is_benchmax(owner: type) -> bool:
    try:
        source = inspect.getsourcefile(owner)
    except TypeError:
        return True  # a builtin
    return source is None or Path(source).resolve().is_relative_to(_BENCHMAX_DIR)


_BENCHMAX_DIR = Path(__file__).resolve().parents[1]


def _definition_at(cls: type, message: str) -> str | None:
    """``FILE:LINE`` of what a contract error names (``CheckedEnv.max_turns is not set``)."""
    named = re.search(rf"\b{re.escape(cls.__name__)}\.(\w+)", message)
    return code_at(cls, named.group(1) if named else None)


async def _check_split(
    env: Environment[Any, Any],
    split: str,
    places: Sequence[Path],
    max_examples: int,
    where: str,
    report: Report,
    labels: dict[int, str],
) -> list[Example[Any]]:
    """The split's first examples, checked; ``labels`` gets where each was read (by ``id``)."""
    owner = f"{where}.create_dataset({split!r})"
    with collect_dataset_problems() as problems:
        try:
            dataset, found_in = await locate_dataset(env, split, places, max_examples=max_examples)  # type: ignore[arg-type]
        except DatasetError as exc:
            report.problem(owner, str(exc))
            return []
        except Exception as exc:
            report.problem(owner, f"raised {type(exc).__name__}: {exc}{_frame(exc)}")
            return []
    for problem in problems:
        report.problem(owner, str(problem))
    seen = len(problems)
    examples = []
    label_owner = f"{type(env).__name__}.create_dataset({split!r})"
    try:
        for index, item in enumerate(dataset):  # a streaming dataset records bad rows as it is read
            if index >= max_examples:
                break
            label = example_location(dataset, label_owner, index)
            try:
                example = to_example(item, where=label)
                if isinstance(env, BaseEnv):
                    check_prompt_messages(example.payload, where=label)
                    _check_roles(example.payload, label, owner, report)
            except DatasetError as exc:
                report.problem(owner, str(exc))
                continue
            examples.append(example)
            labels[id(example)] = label
    except Exception as exc:
        report.problem(owner, f"iterating it raised {type(exc).__name__}: {exc}{_frame(exc)}")
    for problem in problems[seen:]:
        report.problem(owner, str(problem))
    if not examples and not any(p.where == owner for p in report.problems):
        report.problem(owner, "the split is empty")
    report.notes.append(f"{split}: {len(examples)} example{'' if len(examples) == 1 else 's'} checked")
    if found_in != places[0]:
        report.notes.append(f"{split}: data read from {found_in}")
    return examples


def _check_roles(payload: Mapping[str, Any], label: str, owner: str, report: Report) -> None:
    for index, message in enumerate(payload.get("prompt_messages") or ()):
        role = message.get("role") if isinstance(message, Mapping) else None
        if isinstance(role, str) and role not in CHAT_ROLES:
            roles = ", ".join(CHAT_ROLES)
            where = f"{label}: prompt_messages[{index}].role"
            report.problem(owner, f"{where} {role!r} is not a chat role; use one of {roles}")


class _Findings:
    """Problems of the hooks run on synthetic rollouts, each kept once with the rollouts it hit.

    A reward that fails on every example fails the same way on each: one line
    that says where, and on which examples, reads better than ten.
    """

    def __init__(self) -> None:
        self._hits: dict[tuple[str, str], list[str]] = {}

    def add(self, where: str, message: str, occurrence: str) -> None:
        self._hits.setdefault((where, message), []).append(occurrence)

    def report(self, report: Report) -> None:
        for (where, message), occurrences in self._hits.items():
            head, sep, tail = message.partition(": ")
            report.problem(where, f"{head} ({_occurrences(occurrences)}){sep}{tail}")


def _occurrences(found: Sequence[str]) -> str:
    """``train example 0, eval examples 0-4`` from ``["train 0", "eval 0", ..., "eval 4"]``."""
    by_split: dict[str, list[int]] = {}
    for item in found:
        split, _, index = item.partition(" ")
        by_split.setdefault(split, []).append(int(index))
    parts = []
    for split, indices in by_split.items():
        runs: list[str] = []
        for index in sorted(indices):
            if runs and runs[-1].rpartition("-")[2] == str(index - 1):
                runs[-1] = f"{runs[-1].partition('-')[0]}-{index}"
            else:
                runs.append(str(index))
        noun = "example" if len(indices) == 1 else "examples"
        parts.append(f"{split} {noun} {', '.join(runs)}")
    return ", ".join(parts)


async def _check_hooks(
    env: BaseEnv,
    examples: Mapping[str, Sequence[Example[Any]]],
    report: Report,
    tool_sets: ToolSets | None,
    labels: Mapping[int, str],
) -> bool:
    """Run ``compute_reward`` (and the group hook) on a synthetic finished rollout of each example,
    and resolve its tools there when the env chooses them per rollout (``tool_sets``).

    Returns whether ``rollout_context`` entered and left cleanly every time (tools run inside it).
    """
    context_works = True
    cls = type(env)
    name = cls.__name__
    findings = _Findings()
    for split, split_examples in examples.items():
        if not split_examples:
            continue
        rollouts: list[BaseRollout] = []
        failed = False  # a reward hook's problem is reported as one: then no "ran" note for the split
        for index, example in enumerate(split_examples):
            rollout_id = f"validate/{split}/{index}"
            payload = example.payload
            messages = [dict(message) for message in payload["prompt_messages"]]
            messages.append({"role": "assistant", "content": _SYNTHETIC_ANSWER})
            rollout = BaseRollout(
                rollout_id=rollout_id,
                termination_reason=TerminationReason.FINISHED,
                messages=messages,
                example_args={key: value for key, value in payload.items() if key != "prompt_messages"},
                split=split,  # type: ignore[arg-type]
                example_id=example.id,
            )
            # The hook that raised is named: an error entering or leaving rollout_context is the
            # context's, not compute_reward's.
            hook, attribute = "rollout_context", "rollout_context"
            try:
                async with env.rollout_context(rollout_id, example):
                    if tool_sets is not None:
                        await tool_sets.resolve(example, labels.get(id(example), f"{split} example {index}"))
                    if implements(env, "compute_reward"):
                        hook = attribute = "compute_reward"
                        rewards = await env.compute_reward(rollout)
                        problem = _reward_problem(rewards)
                        if problem is not None:
                            failed = True
                            findings.add(code_at(cls, hook) or name, f"{name}.{hook}: {problem}", f"{split} {index}")
                    hook, attribute = "rollout_context (on exit)", "rollout_context"
            except Exception as exc:
                context_works = context_works and attribute != "rollout_context"
                failed = failed or attribute == "compute_reward"
                at = code_at(cls, attribute) or name
                findings.add(at, f"{name}.{hook}: raised {type(exc).__name__}: {exc}{_frame(exc)}", f"{split} {index}")
                continue
            rollouts.append(rollout)
        if rollouts and implements(env, "compute_group_rewards"):
            at = code_at(cls, "compute_group_rewards") or name
            label = f"{name}.compute_group_rewards"
            try:
                value = await env.compute_group_rewards(rollouts)
            except Exception as exc:
                failed = True
                report.problem(at, f"{label} ({split}): raised {type(exc).__name__}: {exc}{_frame(exc)}")
            else:
                if value is not None and not isinstance(value, Mapping | list | tuple):
                    failed = True
                    report.problem(
                        at,
                        f"{label} ({split}): must return {{rollout_id: rewards}} or a list, got {type(value).__name__}",
                    )
                elif isinstance(value, Mapping):
                    for rollout_id, rewards in value.items():
                        problem = _reward_problem(rewards)
                        if problem is not None:
                            failed = True
                            report.problem(at, f"{label} ({split}) for {rollout_id!r}: {problem}")
        if not failed:
            noun = "rollout" if len(rollouts) == 1 else "rollouts"
            report.notes.append(f"{split}: reward hooks ran on {len(rollouts)} synthetic {noun}")
    findings.report(report)
    return context_works


def _reward_problem(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"must return a dict of {{component: number}}, got {type(value).__name__}"
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            return f"returned a reward key {key!r}; keys must be non-empty strings"
        if isinstance(item, bool) or not isinstance(item, int | float):
            return f"returned {key!r}={item!r} ({type(item).__name__}); rewards must be numbers"
    return None


async def _check_tool_calls(
    env: BaseEnv, plan: Sequence[tuple[Example[Any], Mapping[str, Tool] | None]], report: Report
) -> None:
    """Call each tool once with arguments its schema accepts, as a model may send them.

    A tool that raises anything but ``ToolError`` (the model sees that one and goes
    on) ends a real rollout as ``tool_error``: a tool that does so on plain valid
    arguments will most likely do so on every call. ``plan``: each tool set with
    an example that uses it (``None``: ``list_tools()``); each tool is called once,
    inside the context of the first example whose set holds it.
    """
    cls = type(env)
    if not implements(env, "run_tool"):
        return
    at = code_at(cls, "run_tool") or cls.__name__
    called: set[str] = set()
    total = 0
    for example, declared in plan:
        if declared is None:
            try:
                declared = validate_tools(await env.list_tools(), owner=cls.__name__)
            except Exception:
                return  # reported by _check_base_env
        tools = {name: tool for name, tool in declared.items() if name not in called}
        total += len(tools)
        if tools:
            await _call_tools(env, example, tools, at, called, report)
    if total:
        report.notes.append(f"tools called once each with placeholder arguments: {len(called)} of {total}")


async def _call_tools(
    env: BaseEnv, example: Example[Any], tools: Mapping[str, Tool], at: str, called: set[str], report: Report
) -> None:
    cls = type(env)
    rollout_id = "validate/tools"
    try:
        async with env.rollout_context(rollout_id, example):
            for name, tool in tools.items():
                arguments = _placeholder_arguments(tool["function"].get("parameters") or {})
                shown = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
                try:
                    await env.run_tool(rollout_id, name, **arguments)
                except (ToolError, RolloutFailure):
                    pass  # the model is told, or the rollout ends as the env decided
                except Exception as exc:
                    report.problem(
                        at,
                        f"{cls.__name__}.run_tool({name!r}, {shown}) raised {type(exc).__name__}: {exc}{_frame(exc)}; "
                        "in a run this ends the rollout as tool_error (raise ToolError for a failure the model "
                        "should see)",
                    )
                called.add(name)
    except Exception as exc:
        report.problem(
            code_at(cls, "rollout_context") or at,
            f"{cls.__name__}.rollout_context (around the tool calls): raised {type(exc).__name__}: {exc}{_frame(exc)}",
        )


def _placeholder_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The required arguments of a tool, each a plain value its declared type accepts."""
    properties = schema.get("properties") or {}
    return {key: _placeholder(properties.get(key) or {}) for key in schema.get("required") or () if key in properties}


def _placeholder(schema: Mapping[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), None)
    return {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}, "null": None}.get(str(kind), "x")


def _frame(exc: BaseException) -> str:
    """`` (at FILE:LINE)`` of the innermost frame outside benchmax, where the env's code raised."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if "/benchmax/" not in frame.filename]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at {frame.filename}:{frame.lineno})"


async def _check_group(
    env: BaseEnv,
    example: Example[Any],
    base_url: str,
    model: str,
    api_key_env: str | None,
    where: str,
    report: Report,
) -> None:
    base_url, credentials = split_credentials(base_url)
    if credentials is not None and api_key_env:
        report.problem(
            where,
            f"--base-url {redact_url(base_url)} carries credentials (user:password@, sent as basic auth) and "
            f"--api-key-env {api_key_env} names a key: a request carries one Authorization header, give one",
        )
        return
    auth: ModelAuth | None = StaticBearerAuth.from_env(api_key_env) if api_key_env else credentials
    engine = Engine(env, EngineConfig(request_timeout=120, max_outage=30))
    try:
        requests = [RolloutRequest(f"validate#{index}", example, model, base_url, auth, "eval") for index in range(2)]
        result = await engine.run_group(requests)
    finally:
        await engine.aclose()
    for outcome in result.outcomes:
        if outcome.scored:
            report.notes.append(f"{outcome.rollout_id}: {outcome.termination_reason}, rewards {dict(outcome.rewards)}")
        else:
            report.problem(f"{where} rollout {outcome.rollout_id}", f"{outcome.termination_reason}: {outcome.error}")
