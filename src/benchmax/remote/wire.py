"""The wire form of an env served over HTTP: one definition for ``benchmax serve`` and its proxy.

The server encodes what env code returned or raised; the proxy
(:class:`benchmax.remote.RemoteEnv`) turns it back into what the engine expects
from a local env: a tool result, a ``ToolError``, a ``RolloutFailure`` with the
reason and message a local run would record, the rollout's log records. So a
remote run's records match a local run's. Everything is plain JSON.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from benchmax.envs import (
    SPLITS,
    BaseRollout,
    DatasetSplit,
    EnvResponse,
    Example,
    RolloutFailure,
    TerminationReason,
    ToolError,
    TurnRecord,
    is_content_part,
)
from benchmax.errors import BenchmaxError

PROTOCOL = "benchmax-env/1"
"""Named in ``GET /info``; a proxy refuses a server that speaks another."""
TOKEN_ENV = "BENCHMAX_SERVE_TOKEN"
"""Where the proxy and ``benchmax serve`` read the bearer token (it never goes into a URL or a run)."""


def token_path(port: int) -> Path:
    """Where ``benchmax serve`` keeps the token it generated for ``port`` while it runs.

    The file is the user's alone (0600 in a 0700 directory), so a proxy on this
    machine (``benchmax eval http://127.0.0.1:PORT``) runs env code without the
    token being printed or passed around, while web pages and other users cannot
    read it.
    """
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "benchmax" / "serve" / f"{port}.token"


_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


class ErrorCode(StrEnum):
    """``error.code`` of every error body; the proxy maps each to what a local run would record."""

    BAD_REQUEST = "bad_request"
    """The body is not what the endpoint takes (HTTP 400); ``message`` names the field."""
    NOT_FOUND = "not_found"
    """No such route, split or example (HTTP 404)."""
    SESSION_NOT_FOUND = "session_not_found"
    """The session expired, was torn down, or never existed (HTTP 404)."""
    CONFLICT = "conflict"
    """The rollout id has an open session already, or the session is closing (HTTP 409)."""
    TOO_LARGE = "too_large"
    """The body is larger than ``--max-request-bytes`` (HTTP 413)."""
    CAPACITY = "capacity"
    """``--max-sessions`` sessions are open (HTTP 503), or this client (its token) holds its share,
    ``--max-sessions-per-client`` (HTTP 429)."""
    TOOL_ERROR = "tool_error"
    """``run_tool`` raised ``ToolError``: its message is a tool result the model sees."""
    ROLLOUT_FAILURE = "rollout_failure"
    """Env code raised ``RolloutFailure``: ``termination_reason`` and ``message`` are its own."""
    HOOK_ERROR = "hook_error"
    """Env code raised anything else: ``hook``, ``exception`` (the type's name) and ``message``."""
    INVALID_RESULT = "invalid_result"
    """Env code returned something JSON cannot carry (a reward that is not a mapping of numbers)."""
    DATASET_ERROR = "dataset_error"
    """``create_dataset`` or one of its rows is unusable; ``message`` names ``file:line``."""
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    """A body sent without ``Content-Type: application/json`` (HTTP 415): what a web page's form or
    ``no-cors`` request sends, refused before env code runs."""
    INTERNAL = "internal_error"
    """The server itself failed (HTTP 500): a bug to report."""


class WireError(BenchmaxError, ValueError):
    """A body that does not follow the protocol; the server answers it with ``code`` (a 4xx)."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.BAD_REQUEST) -> None:
        super().__init__(message)
        self.code = code


def error_body(code: ErrorCode | str, message: str, **fields: Any) -> dict[str, Any]:
    return {"error": {"code": str(code), "message": message, **fields}}


def hook_error(hook: str, exc: BaseException, **fields: Any) -> dict[str, Any]:
    """What env code raised inside ``hook``, as the error the proxy maps back (see :func:`failure_of`)."""
    if isinstance(exc, ToolError):
        return error_body(ErrorCode.TOOL_ERROR, str(exc), hook=hook, **fields)
    if isinstance(exc, RolloutFailure):
        return error_body(
            ErrorCode.ROLLOUT_FAILURE, exc.message, hook=hook, termination_reason=exc.termination_reason, **fields
        )
    if isinstance(exc, WireError):
        return error_body(exc.code, str(exc), hook=hook, **fields)
    return error_body(ErrorCode.HOOK_ERROR, str(exc), hook=hook, exception=type(exc).__name__, **fields)


def failure_of(error: Mapping[str, Any]) -> tuple[str, str]:
    """The termination reason and error text a local run records for a hook's error.

    The engine words a crash in each hook in its own way; these are the same words,
    so a remote run's ``error`` column reads as a local run's.
    """
    code = error.get("code")
    message = str(error.get("message") or "")
    hook = str(error.get("hook") or "")
    exception = str(error.get("exception") or "Exception")
    if code == ErrorCode.ROLLOUT_FAILURE:
        return str(error.get("termination_reason") or TerminationReason.HARNESS_ERROR), message or "(no message)"
    where = f" ({error['where']})" if isinstance(error.get("where"), str) else ""
    if hook == "env_response":
        if code == ErrorCode.INVALID_RESULT:
            return TerminationReason.ENV_RESPONSE_ERROR, f"env_response{where}: {message}"
        return TerminationReason.ENV_RESPONSE_ERROR, f"env_response{where} raised {exception}: {message}"
    if code == ErrorCode.INVALID_RESULT:
        reason = (
            TerminationReason.GROUP_REWARD_ERROR if hook == "compute_group_rewards" else TerminationReason.REWARD_ERROR
        )
        return reason, message
    if hook == "run_tool":
        return TerminationReason.TOOL_ERROR, f"tool {error.get('tool')!r} raised {exception}: {message}"
    if hook == "compute_reward":
        return TerminationReason.REWARD_ERROR, f"compute_reward raised {exception}: {message}"
    if hook == "compute_group_rewards":
        return TerminationReason.GROUP_REWARD_ERROR, f"compute_group_rewards raised {exception}: {message}"
    if hook == "rollout_context":
        return TerminationReason.CONTEXT_ERROR, f"{exception}: {message}"
    return TerminationReason.HARNESS_ERROR, f"{hook or 'the env server'} failed: {exception}: {message}"


def tool_result(result: object) -> str | list[Any]:
    """A tool's return value as the engine turns it into the text the model sees.

    Strings and content-part lists go as they are (the engine truncates them);
    anything else becomes its compact JSON text, or ``str()`` when it is not
    JSON, as the engine does for a local tool.
    """
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, list | tuple) and result and all(is_content_part(part) for part in result):
        return [dict(part) for part in result]
    try:
        return orjson.dumps(result, option=_JSON_OPTIONS).decode()
    except TypeError:
        return _text(result)


def rewards_value(value: object, hook: str) -> Any:
    """A scoring hook's return value for the wire; non-finite numbers cannot travel as JSON.

    Raises :class:`WireError` (``invalid_result``) for what JSON cannot carry, so the
    proxy settles it as the reward error a local run records.
    """
    if _has_non_finite(value):
        raise WireError(
            f"{hook} returned a non-finite reward ({value!r}); rewards must be finite", ErrorCode.INVALID_RESULT
        )
    try:
        orjson.dumps(value, option=_JSON_OPTIONS)
    except TypeError as exc:
        raise WireError(
            f"{hook} returned {type(value).__name__}, which is not JSON ({exc})", ErrorCode.INVALID_RESULT
        ) from None
    return value


def env_response_value(value: object) -> dict[str, Any] | None:
    """``env_response``'s return value for the wire (``None`` stays ``None``); the proxy's engine
    checks it as it checks a local env's. Raises :class:`WireError` (``invalid_result``) for
    what is no ``EnvResponse`` or cannot travel as JSON."""
    if value is None:
        return None
    if not isinstance(value, EnvResponse):
        raise WireError(
            f"env_response returned {type(value).__name__}; return an EnvResponse(messages, rewards, done, info) "
            "or None",
            ErrorCode.INVALID_RESULT,
        )
    body = {
        "messages": list(value.messages),
        "rewards": None if value.rewards is None else rewards_value(value.rewards, "env_response"),
        "done": value.done,
        "info": value.info,
    }
    try:
        orjson.dumps(body, option=_JSON_OPTIONS)
    except TypeError as exc:
        raise WireError(f"env_response returned what is not JSON ({exc})", ErrorCode.INVALID_RESULT) from None
    return body


def env_response_from(data: object) -> EnvResponse | None:
    """The ``EnvResponse`` a server sent (``None``: nothing to add); the engine checks its fields."""
    if data is None:
        return None
    body = _object(data, "response")
    messages = body.get("messages") or ()
    if not isinstance(messages, list):
        raise WireError("response.messages must be a list")
    return EnvResponse(tuple(messages), body.get("rewards"), body.get("done", False), body.get("info"))


def example_json(example: Example[Any]) -> dict[str, Any]:
    return {"id": example.id, "payload": example.payload}


def example_from(data: object, where: str) -> Example[Any]:
    body = _object(data, where)
    example_id = body.get("id")
    if not isinstance(example_id, str) or not example_id.strip():
        raise WireError(f"{where}.id must be a non-empty string")
    return Example(example_id, body.get("payload"))


def split_from(value: object, where: str) -> DatasetSplit:
    if value not in SPLITS:
        raise WireError(f"{where} must be one of {list(SPLITS)}, got {value!r}")
    return value  # type: ignore[return-value]


def turn_json(turn: TurnRecord) -> dict[str, Any]:
    return dataclasses.asdict(turn)


def rollout_json(rollout: BaseRollout) -> dict[str, Any]:
    """A finished rollout as the scoring hooks see it (``BaseRollout``'s fields)."""
    return {
        "rollout_id": rollout.rollout_id,
        "example_id": rollout.example_id,
        "split": rollout.split,
        "termination_reason": rollout.termination_reason,
        "rewards": rollout.rewards,
        "error": rollout.error,
        "messages": list(rollout.messages),
        "example_args": dict(rollout.example_args),
        "turns": [turn_json(turn) for turn in rollout.turns],
    }


def rollout_from(
    data: object,
    where: str,
    *,
    example: Example[Any] | None = None,
    split: DatasetSplit | None = None,
    rollout_id: str | None = None,
) -> BaseRollout:
    """The ``BaseRollout`` a body describes; a session's own example, split and id win over the body's."""
    body = _object(data, where)
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(message, Mapping) for message in messages):
        raise WireError(f"{where}.messages must be a list of message objects")
    turns_raw = body.get("turns") or []
    if not isinstance(turns_raw, list):
        raise WireError(f"{where}.turns must be a list")
    try:
        turns = tuple(TurnRecord.from_dict(_object(turn, f"{where}.turns[{i}]")) for i, turn in enumerate(turns_raw))
    except (TypeError, ValueError) as exc:
        raise WireError(f"{where}.turns: {exc}") from None
    if example is not None:
        payload = example.payload
        example_id = example.id
        args = {k: v for k, v in payload.items() if k != "prompt_messages"} if isinstance(payload, Mapping) else {}
    else:
        example_id = body.get("example_id")
        if not isinstance(example_id, str):
            raise WireError(f"{where}.example_id must be a string")
        args = body.get("example_args") or {}
        if not isinstance(args, Mapping):
            raise WireError(f"{where}.example_args must be an object")
    try:
        return BaseRollout(
            rollout_id=rollout_id if rollout_id is not None else str(body.get("rollout_id") or ""),
            termination_reason=str(body.get("termination_reason") or ""),
            rewards=body.get("rewards"),
            error=body.get("error"),
            messages=[dict(message) for message in messages],
            example_args=dict(args),
            split=split if split is not None else split_from(body.get("split"), f"{where}.split"),
            example_id=example_id,
            turns=turns,
        )
    except (TypeError, ValueError) as exc:
        raise WireError(f"{where}: {exc}") from None


def log_json(record: logging.LogRecord, rollout_id: str | None, max_chars: int = 16_384) -> dict[str, Any]:
    """A log record env code emitted on the server, with the rollout it belongs to."""
    import traceback as tb

    try:
        message = record.getMessage()
    except Exception as exc:
        message = f"<unformattable log message {record.msg!r}: {exc}>"
    trace = None
    if record.exc_info and record.exc_info[0] is not None:
        trace = "".join(tb.format_exception(*record.exc_info))[-max_chars:]
    elif record.stack_info:
        trace = record.stack_info[-max_chars:]
    return {
        "rollout_id": rollout_id,
        "time": record.created,
        "level": record.levelname,
        "levelno": record.levelno,
        "logger": record.name,
        "message": message[:max_chars],
        "file": record.pathname,
        "line": record.lineno,
        "traceback": trace,
    }


def emit_logs(entries: object) -> None:
    """Log again, here, the records env code emitted on the server.

    Re-emitted through the same logger names, inside the engine's capture of the
    rollout that made the call, they are stored with that rollout (their phase
    and turn are the engine's own), with the server's time, file and line.
    """
    if not isinstance(entries, list):
        return
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        name = str(entry.get("logger") or "benchmax.serve")
        level = entry.get("levelno")
        level = level if isinstance(level, int) else logging.getLevelName(str(entry.get("level") or "INFO"))
        level = level if isinstance(level, int) else logging.INFO
        logger = logging.getLogger(name)
        if not logger.isEnabledFor(level):
            continue
        line = entry.get("line")
        record = logger.makeRecord(
            name,
            level,
            str(entry.get("file") or ""),
            line if isinstance(line, int) else 0,
            str(entry.get("message") or ""),
            None,
            None,
            sinfo=entry.get("traceback") if isinstance(entry.get("traceback"), str) else None,
        )
        created = entry.get("time")
        if isinstance(created, int | float):
            record.created = float(created)
            record.msecs = (record.created - int(record.created)) * 1000
        logger.handle(record)


def _object(data: object, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise WireError(f"{where} must be a JSON object, got {type(data).__name__}")
    return data


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception as exc:
        return f"<{type(value).__name__} result that cannot be shown: {type(exc).__name__}: {exc}>"



def _has_non_finite(value: object) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_has_non_finite(item) for item in value.values())
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return any(_has_non_finite(item) for item in value)
    return False
