"""Tool declarations and tool calls: validation, dispatch, result serialisation.

Everything the model sends here is untrusted: names, ids and JSON are checked
before env code sees them, and a malformed call becomes an error message to the
model rather than an exception in the loop. Dispatch follows benchmax 0.2.x:
arguments reach ``run_tool`` as the model sent them (an env may opt in to
schema checks with ``check_tool_arguments``), the calls of one turn run one
after another (``concurrent_tool_calls`` opts in to running them together),
and the messages for unknown tools and bad JSON are worded as 0.2.x words them.
Every call whose result tells the model of an error is named in the turn's
record (``TurnRecord.tool_errors``), never marked inside the text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import orjson

from benchmax.envs import (
    BaseEnv,
    EnvDefinitionError,
    Message,
    RolloutFailure,
    TerminationReason,
    Tool,
    ToolError,
    content_text,
    is_content_part,
    tool_message,
    truncate_text,
)
from benchmax.telemetry import tool_result, tool_span

logger = logging.getLogger("benchmax.tools")

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_RESERVED = frozenset({"self", "rollout_id", "tool_name"})


def validate_tools(tools: object, *, owner: str, hook: str = "list_tools()") -> dict[str, Tool]:
    """Check OpenAI function-tool declarations; returns them by name.

    Raises :class:`EnvDefinitionError` naming the offending tool and the hook
    that declared it (``hook``: ``list_tools()``, or ``tools_for(example 'x')``
    for a rollout's own set), so a typo in a schema is found before a model call.
    """
    if not isinstance(tools, list | tuple):
        raise EnvDefinitionError(f"{owner}.{hook} must return a list, got {type(tools).__name__}")
    by_name: dict[str, Tool] = {}
    for index, tool in enumerate(tools):
        if tool is Ellipsis:
            continue  # the spec's example writes ``return [...]`` for "no tools yet"
        where = f"{owner}.{hook}[{index}]"
        if not isinstance(tool, Mapping):
            raise EnvDefinitionError(f"{where}: a tool must be a dict, got {type(tool).__name__}")
        if tool.get("type") != "function":
            raise EnvDefinitionError(f"{where}: 'type' must be 'function', got {tool.get('type')!r}")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise EnvDefinitionError(f"{where}: missing the 'function' object")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise EnvDefinitionError(f"{where}: function.name must match [A-Za-z0-9_.-]{{1,64}}, got {name!r}")
        where = f"{where} ({name!r})"
        if name in by_name:
            raise EnvDefinitionError(f"{where}: duplicate tool name")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise EnvDefinitionError(f"{where}: function.description must be a string")
        parameters = function.get("parameters")
        if parameters is not None:
            if not isinstance(parameters, Mapping):
                raise EnvDefinitionError(f"{where}: function.parameters must be a JSON Schema object")
            try:
                jsonschema.validators.validator_for(parameters).check_schema(parameters)
            except jsonschema.SchemaError as exc:
                path = "/".join(str(part) for part in exc.absolute_path) or "(root)"
                raise EnvDefinitionError(
                    f"{where}: invalid JSON Schema in function.parameters at {path}: {exc.message}"
                ) from None
            if parameters.get("type", "object") != "object":
                raise EnvDefinitionError(f"{where}: function.parameters must describe an object (type: object)")
        try:
            orjson.dumps(tool)
        except TypeError as exc:
            raise EnvDefinitionError(f"{where}: not JSON-serialisable ({exc})") from None
        by_name[name] = dict(tool)
    return by_name


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolStop:
    """A tool call that ends the rollout."""

    reason: str
    error: str


def parse_tool_calls(message: Mapping[str, Any], *, turn: int) -> list[ToolCall]:
    """Normalise the assistant message's tool calls; junk entries become named errors."""
    raw_calls = message.get("tool_calls")
    if not raw_calls:
        return []
    if not isinstance(raw_calls, list):
        raw_calls = [raw_calls]
    calls = []
    for index, raw in enumerate(raw_calls):
        call_id = f"call_{turn}_{index}"
        name = ""
        arguments = ""
        if isinstance(raw, Mapping):
            if isinstance(raw.get("id"), str) and raw["id"]:
                call_id = raw["id"][:200]
            function = raw.get("function")
            if isinstance(function, Mapping):
                name = function.get("name") if isinstance(function.get("name"), str) else ""
                args = function.get("arguments")
                if isinstance(args, str):
                    arguments = args
                elif isinstance(args, Mapping):
                    try:
                        arguments = orjson.dumps(args).decode()
                    except orjson.JSONEncodeError as exc:
                        arguments = f"<arguments object not encodable: {exc}>"
                elif args is None:
                    arguments = "{}"
                else:
                    arguments = repr(args)[:1000]
        calls.append(ToolCall(call_id, name[:200], arguments))
    return calls


def assistant_message(message: Mapping[str, Any], calls: Sequence[ToolCall], max_chars: int) -> Message:
    """The transcript form of a model turn: its text as sent (``None`` stays ``None``), its calls."""
    content = message.get("content")
    if isinstance(content, list):
        content = content_text(content)
    elif content is not None and not isinstance(content, str):
        content = str(content)
    result: Message = {"role": "assistant", "content": None if content is None else truncate_text(content, max_chars)}
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            result[key] = truncate_text(value, max_chars)
    if calls:
        result["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": truncate_text(call.arguments, max_chars)},
            }
            for call in calls
        ]
    return result


def serialise_result(result: object, max_chars: int) -> str | list[Any]:
    """Tool results: strings as is, content-part lists passed through, the rest as compact JSON."""
    if result is None:
        return ""
    if isinstance(result, str):
        return truncate_text(result, max_chars)
    if isinstance(result, list | tuple) and result and all(is_content_part(part) for part in result):
        return [
            {**part, "text": truncate_text(part["text"], max_chars)} if part.get("type") == "text" else dict(part)
            for part in result
        ]
    try:
        text = orjson.dumps(result, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()
    except TypeError:
        try:
            text = str(result)
        except Exception as exc:
            text = f"<{type(result).__name__} result that cannot be shown: {type(exc).__name__}: {exc}>"
    return truncate_text(text, max_chars)


@dataclass(frozen=True, slots=True)
class ToolTurn:
    """What one turn's tool calls produced: their messages, the calls that errored, and a stop."""

    messages: list[Message]
    errors: tuple[str, ...]
    stop: ToolStop | None


async def run_tool_calls(
    env: BaseEnv,
    rollout_id: str,
    calls: Sequence[ToolCall],
    known: Mapping[str, Tool],
    *,
    timeout: float | None,
    max_chars: int,
) -> ToolTurn:
    """Run one turn's calls (in order, or together when the env opts in); messages keep the calls' order.

    In order, a call that ends the rollout (``RolloutFailure``, a crash, a
    timeout) stops the calls after it, as in 0.2.x.
    """
    check = bool(getattr(env, "check_tool_arguments", False))
    outcomes: list[_Result | ToolStop] = []
    if len(calls) > 1 and getattr(env, "concurrent_tool_calls", False):
        outcomes = list(
            await asyncio.gather(
                *(_traced_one(env, rollout_id, call, known, timeout, max_chars, check) for call in calls)
            )
        )
    else:
        for call in calls:
            outcome = await _traced_one(env, rollout_id, call, known, timeout, max_chars, check)
            outcomes.append(outcome)
            if isinstance(outcome, ToolStop):
                break
    messages: list[Message] = []
    errors: list[str] = []
    stop: ToolStop | None = None
    for call, outcome in zip(calls, outcomes, strict=False):
        if isinstance(outcome, ToolStop):
            stop = stop or outcome
            messages.append(tool_message(call.id, f"error: {outcome.error}"))
            errors.append(call.id)
        else:
            messages.append(tool_message(call.id, outcome.content))
            if outcome.error:
                errors.append(call.id)
    return ToolTurn(messages, tuple(errors), stop)


@dataclass(frozen=True, slots=True)
class _Result:
    content: str | list[Any]
    error: bool = False


_validators: dict[int, tuple[object, Any, Callable[[dict[str, Any]], bool] | None]] = {}
_PLAIN_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
}
_NOTES = frozenset({"description", "title"})


def _plain_checker(parameters: Mapping[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """A quick accept for the flat schemas most tools declare, or None for any other schema.

    jsonschema costs ~20 us per call even for ``{a: integer, b: integer}``; this
    answers in ~1 us. It only ever *accepts* (and is stricter than jsonschema,
    e.g. it refuses ``1.0`` as an integer), so a False sends the call through
    jsonschema, which decides and words the error: behaviour is unchanged.
    """
    if set(parameters) - {"type", "properties", "required", "additionalProperties"} - _NOTES:
        return None
    properties = parameters.get("properties", {})
    required = parameters.get("required", [])
    extra_ok = parameters.get("additionalProperties", True)
    if parameters.get("type") != "object" or not isinstance(extra_ok, bool):
        return None
    if not isinstance(properties, Mapping) or not isinstance(required, list | tuple):
        return None
    checks: dict[str, Callable[[object], bool]] = {}
    for name, schema in properties.items():
        if not isinstance(schema, Mapping) or set(schema) - {"type"} - _NOTES:
            return None
        check = _PLAIN_TYPES.get(schema.get("type")) if isinstance(schema.get("type"), str) else None
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def accepts(arguments: dict[str, Any]) -> bool:
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if extra_ok:
                    continue
                return False
            if not check(value):
                return False
        return True

    return accepts


def _schema_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """Arguments that break the tool's declared schema go back to the model as an error,
    so env code only ever sees calls it declared it can take."""
    parameters = tool["function"].get("parameters")
    if not parameters:
        return None
    hit = _validators.get(id(parameters))
    if hit is not None and hit[0] is parameters:
        _, validator, plain = hit
    else:
        validator = jsonschema.validators.validator_for(parameters)(parameters)
        plain = _plain_checker(parameters)
        if len(_validators) >= 1024:
            _validators.clear()
        _validators[id(parameters)] = (parameters, validator, plain)
    if plain is not None and plain(arguments):
        return None
    if validator.is_valid(arguments):
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    name = tool["function"]["name"]
    return f"error: arguments do not match the schema of {name!r} at {where}: {error.message}"


async def _traced_one(
    env: BaseEnv,
    rollout_id: str,
    call: ToolCall,
    known: Mapping[str, Tool],
    timeout: float | None,
    max_chars: int,
    check_arguments: bool,
) -> _Result | ToolStop:
    """``_run_one`` as an ``execute_tool`` span of the rollout's trace (a no-op while tracing is off)."""
    with tool_span(call.id, call.name, call.arguments) as active:
        outcome = await _run_one(env, rollout_id, call, known, timeout, max_chars, check_arguments)
        if active is not None:
            if isinstance(outcome, ToolStop):
                tool_result(active, outcome.error, failed=outcome.error)
            else:
                tool_result(active, outcome.content, failed=str(outcome.content)[:500] if outcome.error else None)
    return outcome


async def _run_one(
    env: BaseEnv,
    rollout_id: str,
    call: ToolCall,
    known: Mapping[str, Tool],
    timeout: float | None,
    max_chars: int,
    check_arguments: bool,
) -> _Result | ToolStop:
    if call.name not in known:
        return _Result(f"Unknown tool: {call.name}", error=True)
    try:
        arguments = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        return _Result(f"Invalid JSON tool arguments: {_json_problem(call.arguments)}", error=True)
    if not isinstance(arguments, dict):
        return _Result("Tool arguments must be a JSON object.", error=True)
    clash = _RESERVED.intersection(arguments)
    if clash:
        return _Result(f"error: argument names {sorted(clash)} are reserved; rename them", error=True)
    if check_arguments:
        problem = _schema_problem(known[call.name], arguments)
        if problem is not None:
            return _Result(problem, error=True)
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            result = await env.run_tool(rollout_id, call.name, **arguments)
    except ToolError as exc:
        return _Result(truncate_text(f"error: {exc}", max_chars), error=True)
    except RolloutFailure as exc:
        return ToolStop(exc.termination_reason, exc.message)
    except TimeoutError as exc:
        if not deadline.expired():
            # The tool's own TimeoutError (a slow upstream) is a tool failure, not our limit.
            logger.error("tool %r raised TimeoutError", call.name, exc_info=exc)
            return ToolStop(TerminationReason.TOOL_ERROR, f"tool {call.name!r} raised TimeoutError: {exc}")
        return ToolStop(TerminationReason.TIMEOUT, f"tool call {call.name!r} ran past its {timeout:g}s limit")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        logger.exception("tool %r raised %s", call.name, type(exc).__name__)
        return ToolStop(TerminationReason.TOOL_ERROR, f"tool {call.name!r} raised {type(exc).__name__}: {exc}")
    return _Result(serialise_result(result, max_chars))


def _json_problem(text: str) -> str:
    """What is wrong with ``text`` as JSON, in the stdlib's words (as 0.2.x tells the model)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.msg
    except RecursionError:
        return "nested too deeply"
    return "not valid JSON"
