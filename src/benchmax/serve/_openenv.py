"""OpenEnv's WebSocket protocol (``/ws``) over benchmax sessions, so an OpenEnv client can drive the env.

OpenEnv's ``EnvClient`` holds one WebSocket per episode and sends
``{"type": "reset" | "step" | "state" | "close", "data": ...}``; the server
answers ``{"type": "observation", "data": {"observation", "reward", "done"}}``,
``{"type": "state", "data": ...}`` or ``{"type": "error", "data": {"message",
"code"}}``. Here an episode is one rollout's session:

* ``reset`` ``{"split", "index" | "example_id", "episode_id"?}`` opens it (the
  env's ``rollout_context`` is entered) and observes the prompt and the tools;
* ``step`` takes OpenEnv's MCP-style actions, ``{"type": "call_tool",
  "tool_name", "arguments"}`` (a ``run_tool`` call) and ``{"type":
  "list_tools"}``, plus benchmax's ``{"type": "submit", "messages" |
  "completion", "termination_reason"?}``, which scores the finished transcript
  (``compute_reward``), closes the session and ends the episode (``done``);
* a disconnect, ``close``, a new ``reset`` or the idle TTL closes it.

What OpenEnv has no word for (group rewards, paging the dataset) stays on
benchmax's REST endpoints; ``docs/serve.md`` maps one onto the other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from benchmax.access import credential_of
from benchmax.envs import TerminationReason, implements
from benchmax.remote import wire
from benchmax.serve._service import EnvService
from benchmax.serve._sessions import Session, SessionError

logger = logging.getLogger("benchmax.serve")

_ACTION = {
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "type": {"const": "call_tool"},
                "tool_name": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["tool_name"],
        },
        {"type": "object", "properties": {"type": {"const": "list_tools"}}, "required": ["type"]},
        {
            "type": "object",
            "properties": {
                "type": {"const": "submit"},
                "messages": {"type": "array", "items": {"type": "object"}},
                "completion": {"type": "string"},
                "termination_reason": {"type": "string"},
            },
            "required": ["type"],
        },
    ]
}
_OBSERVATION = {
    "type": "object",
    "properties": {
        "prompt_messages": {"type": "array"},
        "tools": {"type": "array"},
        "tool_name": {"type": "string"},
        "result": {},
        "error": {"type": ["object", "null"]},
        "rewards": {"type": "object"},
        "termination_reason": {"type": "string"},
    },
}
_STATE = {
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer"},
        "example_id": {"type": "string"},
        "session_id": {"type": "string"},
    },
}
SCHEMAS = {"action": _ACTION, "observation": _OBSERVATION, "state": _STATE}
"""What ``GET /schema`` shows, in OpenEnv's shape."""


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def endpoint(service: EnvService) -> Callable[[WebSocket], Awaitable[None]]:
    async def websocket(socket: WebSocket) -> None:
        await socket.accept()
        client = credential_of(socket.scope)
        episode = _Episode(service, client)
        why: str | None = "its WebSocket disconnected"
        try:
            while True:
                frame = await socket.receive()
                if frame["type"] == "websocket.disconnect":
                    break
                answer = await _answer(episode, frame.get("text"))
                if answer is None:
                    why = None
                    break
                await socket.send_text(orjson.dumps(answer, option=orjson.OPT_NON_STR_KEYS).decode())
        except WebSocketDisconnect:
            pass
        finally:
            await episode.end(why)
            if why is None:
                await socket.close()

    return websocket


async def _answer(episode: _Episode, text: str | None) -> dict[str, Any] | None:
    """The answer to one frame; ``None`` for ``close``. A binary frame is a protocol error, answered
    as one, and the socket goes on: OpenEnv's messages are JSON text."""
    if text is None:
        return _error("INVALID_MESSAGE", "binary frames are not accepted: send each message as a JSON text frame")
    try:
        message = orjson.loads(text)
        if not isinstance(message, Mapping):
            raise _Refused("VALIDATION_ERROR", "a message is a JSON object with a type")
        kind = message.get("type")
        if kind == "close":
            return None
        return await episode.handle(kind, message.get("data"))
    except orjson.JSONDecodeError as exc:
        return _error("INVALID_JSON", f"Invalid JSON: {exc}")
    except _Refused as exc:
        return _error(exc.code, str(exc))
    except (wire.WireError, SessionError) as exc:
        return _error("VALIDATION_ERROR" if isinstance(exc, wire.WireError) else "SESSION_ERROR", str(exc))


class _Episode:
    """The session one WebSocket holds, from ``reset`` to the end of the episode."""

    def __init__(self, service: EnvService, client: str) -> None:
        self.service = service
        self.client = client
        self.session: Session | None = None

    async def handle(self, kind: object, data: object) -> dict[str, Any]:
        body = data if isinstance(data, Mapping) else {}
        if kind == "reset":
            return await self.reset(body)
        if kind == "step":
            return await self.step(body)
        if kind == "state":
            state = self.session.state() if self.session is not None else {"episode_id": None, "step_count": 0}
            return {"type": "state", "data": state}
        raise _Refused("UNKNOWN_TYPE", f"Unknown message type: {kind}")

    async def reset(self, data: Mapping[str, Any]) -> dict[str, Any]:
        await self.end("a new episode was reset")
        split = wire.split_from(data.get("split", "train"), "split")
        index, example_id = data.get("index"), data.get("example_id")
        if index is None and example_id is None:
            raise _Refused("VALIDATION_ERROR", "reset needs the example: {split, index} or {split, example_id}")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
            raise _Refused("VALIDATION_ERROR", "index must be an integer >= 0")
        example = await self.service.example(
            split, index=index, example_id=example_id if isinstance(example_id, str) else None
        )
        rollout_id = data.get("episode_id") or data.get("rollout_id")
        if rollout_id is not None and not isinstance(rollout_id, str):
            raise _Refused("VALIDATION_ERROR", "episode_id must be a string")
        session, answer = await self.service.open(rollout_id, example, client=self.client)
        if session is None:
            reason, message = wire.failure_of(answer["error"])
            return _observation({"termination_reason": reason, "error": message}, done=True, logs=answer)
        session.split = split
        self.session = session
        observation = {
            key: answer[key] for key in ("prompt_messages", "tools", "example_id", "rollout_id", "session_id")
        }
        return _observation(observation, logs=answer)

    async def step(self, action: Mapping[str, Any]) -> dict[str, Any]:
        if self.session is None:
            raise _Refused("SESSION_ERROR", "no episode is running: send reset first")
        kind = action.get("type", "call_tool")
        async with self.service.sessions.use(self.session.id) as session:
            if kind == "list_tools":
                tools = [
                    {
                        "name": tool["function"]["name"],
                        "description": tool["function"].get("description") or "",
                        "input_schema": tool["function"].get("parameters") or {"type": "object"},
                    }
                    for tool in session.tools
                ]
                return _observation({"tools": tools})
            if kind == "call_tool":
                return await self._call_tool(session, action)
            if kind == "submit":
                return await self._submit(session, action)
        raise _Refused("VALIDATION_ERROR", f"unknown action type {kind!r}: call_tool, list_tools or submit")

    async def _call_tool(self, session: Session, action: Mapping[str, Any]) -> dict[str, Any]:
        name = action.get("tool_name")
        arguments = action.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, Mapping):
            raise _Refused("VALIDATION_ERROR", "call_tool needs tool_name (a string) and arguments (an object)")
        if name not in {tool["function"]["name"] for tool in session.tools}:
            return _observation({"tool_name": name, "result": f"Unknown tool: {name}", "error": None})
        answer = await self.service.call_tool(session, name, arguments)
        error = answer.get("error")
        if error is None:
            return _observation({"tool_name": name, "result": answer["result"], "error": None}, logs=answer)
        if error.get("code") == wire.ErrorCode.TOOL_ERROR:
            observation = {"tool_name": name, "result": f"error: {error['message']}", "error": _tool_error(error)}
            return _observation(observation, logs=answer)
        reason, message = wire.failure_of(error)
        await self.end(None)
        observation = {
            "tool_name": name,
            "result": f"error: {message}",
            "error": _tool_error(error),
            "termination_reason": reason,
        }
        return _observation(observation, done=True, logs=answer)

    async def _submit(self, session: Session, action: Mapping[str, Any]) -> dict[str, Any]:
        messages = action.get("messages")
        if messages is None:
            completion = action.get("completion")
            if not isinstance(completion, str):
                raise _Refused("VALIDATION_ERROR", "submit needs messages (the transcript) or completion (its answer)")
            payload = session.example.payload if isinstance(session.example.payload, Mapping) else {}
            messages = [*payload.get("prompt_messages", []), {"role": "assistant", "content": completion}]
        reason = action.get("termination_reason") or TerminationReason.FINISHED
        body = {"messages": messages, "termination_reason": reason, "split": session.split or "train"}
        scored = await self.service.reward(session, body) if implements(self.service.env, "compute_reward") else {}
        closed = await self.service.close(session)
        self.session = None
        logs = [*scored.get("logs", []), *closed.get("logs", [])]
        error = scored.get("error") or closed.get("error")
        if error is not None:
            failure, message = wire.failure_of(error)
            observation = {"rewards": {}, "termination_reason": failure, "error": message}
            return _observation(observation, done=True, logs={"logs": logs})
        rewards = scored.get("rewards") or {}
        total = sum(value for value in rewards.values() if isinstance(value, int | float)) if rewards else None
        observation = {"rewards": rewards, "termination_reason": reason, "error": None}
        return _observation(observation, reward=total, done=True, logs={"logs": logs})

    async def end(self, why: str | None) -> None:
        session, self.session = self.session, None
        if session is not None and not session.closing:
            await self.service.close(session, why=why)


def _observation(
    observation: Mapping[str, Any],
    *,
    reward: float | None = None,
    done: bool = False,
    logs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"observation": dict(observation), "reward": reward, "done": done}
    if logs is not None and logs.get("logs"):
        data["metadata"] = {"logs": logs["logs"]}
    return {"type": "observation", "data": data}


def _tool_error(error: Mapping[str, Any]) -> dict[str, str]:
    return {"error_type": "execution_error", "message": str(error.get("message") or "")}


def _error(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}
