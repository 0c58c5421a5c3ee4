"""What a served env does for each call, whichever protocol asked (REST or OpenEnv's WebSocket).

Every answer is a JSON object carrying the log records env code emitted while
it ran (``logs``). What env code raised is answered as the structured error the
proxy turns back into a local run's record (:mod:`benchmax.remote.wire`); a
crash is logged here in the words the engine logs it with, so the rollout's
logs read the same either way.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmax import __version__
from benchmax.envs import (
    BaseEnv,
    DatasetSplit,
    Example,
    RolloutFailure,
    Tool,
    ToolError,
    hook_source,
    implements,
    shown_path,
)
from benchmax.envs.logging import group_context
from benchmax.remote import wire
from benchmax.serve._capture import Gathering, gathering
from benchmax.serve._dataset import SplitPages
from benchmax.serve._sessions import ContextFailed, Session, SessionTable

engine_logger = logging.getLogger("benchmax.engine")
tools_logger = logging.getLogger("benchmax.tools")
_RESERVED_ARGUMENTS = frozenset({"self", "rollout_id", "tool_name"})


SESSION_MEMORY_ESTIMATE = 64 * 1024 * 1024
"""Bytes one open session is assumed to hold when the default cap is chosen: a sandboxed session
measured ~16 MB (60 bwrap sandboxes held 954 MB), and its tool processes grow it."""
MIN_DEFAULT_SESSIONS = 16
MAX_DEFAULT_SESSIONS = 1024


def available_memory() -> int | None:
    """Bytes of memory this process may still take: the kernel's ``MemAvailable``, lowered by a
    cgroup v2 limit when one is set; ``None`` where neither can be read."""
    found: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if limit.isdigit() and used.isdigit():
            found.append(max(0, int(limit) - int(used)))
    except OSError:
        pass
    return min(found) if found else None


def default_max_sessions(available: int | None = None) -> int:
    """The session cap when none is given: as many sessions as the free memory holds at
    :data:`SESSION_MEMORY_ESTIMATE` each, between 16 and 1024 (1024 where memory cannot be read)."""
    available = available_memory() if available is None else available
    if available is None:
        return MAX_DEFAULT_SESSIONS
    return max(MIN_DEFAULT_SESSIONS, min(MAX_DEFAULT_SESSIONS, available // SESSION_MEMORY_ESTIMATE))


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """How a served env treats its clients; every field has a safe default."""

    session_ttl: float | None = 300.0
    """Seconds a session may stay idle (no call, no keepalive) before its context is exited."""
    max_sessions: int = field(default_factory=default_max_sessions)
    """Sessions open at once; past it new ones are refused (HTTP 503). By default what the free
    memory holds (:func:`default_max_sessions`), read when the config is made."""
    max_sessions_per_client: int | None = None
    """Sessions one client (one peer address) may hold at once; past it its new ones are refused
    (HTTP 429). ``None``: half of ``max_sessions``, so no one client takes the whole server."""
    max_request_bytes: int = 64 * 1024 * 1024
    """The largest request body or WebSocket message (a transcript with long tool results)."""
    max_page: int = 1000
    """The most examples one dataset page holds."""
    shutdown_grace: float = 30.0
    """Seconds shutdown waits for contexts to exit before cancelling them."""

    def __post_init__(self) -> None:
        if self.max_sessions_per_client is None:
            object.__setattr__(self, "max_sessions_per_client", max(1, self.max_sessions // 2))
        if self.session_ttl is not None and not self.session_ttl > 0:
            raise ValueError(f"session_ttl must be > 0 seconds or None, got {self.session_ttl!r}")
        for name in ("max_sessions", "max_sessions_per_client", "max_request_bytes", "max_page"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")

    def per_client(self) -> int:
        """The per-client cap as resolved (``max_sessions_per_client`` is never ``None`` once made)."""
        return self.max_sessions_per_client or max(1, self.max_sessions // 2)


class EnvService:
    """One env instance, its sessions and its dataset pages."""

    def __init__(self, env: BaseEnv, base_dir: Path, config: ServeConfig, *, spec: str = "") -> None:
        self.env = env
        self.config = config
        self.spec = spec
        self.sessions = SessionTable(
            env,
            ttl=config.session_ttl,
            max_sessions=config.max_sessions,
            max_per_client=config.per_client(),
        )
        self.pages = SplitPages(env, base_dir)

    # The env as a whole.

    def info(self) -> dict[str, Any]:
        env = self.env
        cls = type(env)
        return {
            "protocol": wire.PROTOCOL,
            "benchmax": __version__,
            "env": {"name": cls.__name__, "class": f"{cls.__module__}.{cls.__qualname__}", "spec": self.spec},
            "limits": {
                "max_turns": env.max_turns,
                "max_tool_calls": env.max_tool_calls,
                "check_tool_arguments": bool(env.check_tool_arguments),
                "concurrent_tool_calls": bool(env.concurrent_tool_calls),
            },
            "hooks": {
                "compute_reward": implements(env, "compute_reward"),
                "compute_group_rewards": implements(env, "compute_group_rewards"),
                "env_response": implements(env, "env_response"),
            },
            "outcome_from_transcript": env.outcome_from_transcript,
            "scorable_termination_reasons": sorted(env.scorable_termination_reasons),
            "session_ttl_seconds": self.config.session_ttl,
            "max_sessions": self.config.max_sessions,
            "max_sessions_per_client": self.config.per_client(),
            "max_request_bytes": self.config.max_request_bytes,
            "open_sessions": len(self.sessions),
            "diagnostics": [asdict(item) for item in env.validation_diagnostics()],
        }

    async def tools(self) -> list[Tool]:
        with gathering(Gathering(None)):
            return list(await self.env.list_tools())

    async def page(self, split: DatasetSplit, offset: int, limit: int, max_examples: int | None) -> dict[str, Any]:
        examples, more = await self.pages.page(split, offset, min(limit, self.config.max_page), max_examples)
        return {
            "split": split,
            "offset": offset,
            "examples": [wire.example_json(example) for example in examples],
            "next_offset": offset + len(examples) if more else None,
        }

    # Sessions.

    async def open(
        self, rollout_id: str | None, example: Example[Any], *, client: str = ""
    ) -> tuple[Session | None, dict[str, Any]]:
        """A session for one rollout of ``example``, opened by ``client`` (its peer address): its
        context entered, then its tools resolved (``tools_for(example)``, as the engine resolves
        them, inside the context); its prompt and tools come back, and only those tools may be called."""
        try:
            session, logs = await self.sessions.open(rollout_id, example, client=client)
        except ContextFailed as failed:
            return None, self._context_failed(failed.error, rollout_id, failed.logs)
        try:
            with gathering(Gathering(session.rollout_id)) as listed:
                session.tools = list(await session.run(self.env.tools_for(example)))
            logs.extend(listed.take())
        except Exception as exc:
            logs.extend(listed.take())
            closed = await self.close(session)
            return None, self._context_failed(exc, session.rollout_id, [*logs, *closed["logs"]])
        payload = example.payload if isinstance(example.payload, Mapping) else {}
        return session, {
            "session_id": session.id,
            "rollout_id": session.rollout_id,
            "example_id": example.id,
            "prompt_messages": list(payload.get("prompt_messages") or []),
            "tools": session.tools,
            "ttl_seconds": self.config.session_ttl,
            "logs": logs,
        }

    def _context_failed(self, error: BaseException, rollout_id: str | None, logs: list[Any]) -> dict[str, Any]:
        """A context that failed on its way in or out, as the engine reports it (with the traceback)."""
        if isinstance(error, Exception) and not isinstance(error, RolloutFailure):
            with gathering(Gathering(rollout_id)) as note:
                engine_logger.error(
                    "rollout_context or list_tools of %s failed", type(self.env).__name__, exc_info=error
                )
            logs.extend(note.take())
        return {**wire.hook_error("rollout_context", error), "logs": logs}

    async def close(self, session: Session, *, why: str | None = None) -> dict[str, Any]:
        """Exit the session's context; an error on the way out is the env's ``context_error``."""
        error, logs = await self.sessions.close(session, why=why)
        if isinstance(error, Exception):
            return {"session_id": session.id, "closed": True, **self._context_failed(error, session.rollout_id, logs)}
        return {"session_id": session.id, "closed": True, "logs": logs}

    async def call_tool(self, session: Session, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``run_tool`` for the session's rollout: its result as the model will see it, or its error."""
        clash = _RESERVED_ARGUMENTS.intersection(arguments)
        if clash:
            raise wire.WireError(f"arguments: the names {sorted(clash)} are reserved")
        if name not in {tool["function"]["name"] for tool in session.tools}:
            # The rollout's own set, as the engine answers a call outside it (the model sees it).
            return {**wire.hook_error("run_tool", ToolError(f"Unknown tool: {name}"), tool=name), "logs": []}
        session.tool_calls += 1
        with gathering(Gathering(session.rollout_id)) as logs:
            try:
                result = await session.run(self.env.run_tool(session.rollout_id, name, **arguments))
            except (ToolError, RolloutFailure) as exc:
                return {**wire.hook_error("run_tool", exc, tool=name), "logs": logs.take()}
            except Exception as exc:
                tools_logger.exception("tool %r raised %s", name, type(exc).__name__)
                return {**wire.hook_error("run_tool", exc, tool=name), "logs": logs.take()}
            return {"result": wire.tool_result(result), "logs": logs.take()}

    async def reward(self, session: Session, body: Mapping[str, Any]) -> dict[str, Any]:
        """``compute_reward`` of the finished transcript, inside the session's context."""
        split = session.split if body.get("split") is None else None
        rollout = wire.rollout_from(body, "body", example=session.example, rollout_id=session.rollout_id, split=split)
        with gathering(Gathering(session.rollout_id)) as logs:
            try:
                raw = await session.run(self.env.compute_reward(rollout))
                return {"rewards": wire.rewards_value(raw, "compute_reward"), "logs": logs.take()}
            except (RolloutFailure, wire.WireError) as exc:  # the proxy's engine logs these, as a local one does
                return {**wire.hook_error("compute_reward", exc), "logs": logs.take()}
            except Exception as exc:
                engine_logger.exception("compute_reward raised %s", type(exc).__name__)
                return {**wire.hook_error("compute_reward", exc), "logs": logs.take()}

    async def env_response(self, session: Session, body: Mapping[str, Any]) -> dict[str, Any]:
        """``env_response`` to the transcript so far, inside the session's context: the env's turn."""
        split = session.split if body.get("split") is None else None
        rollout = wire.rollout_from(body, "body", example=session.example, rollout_id=session.rollout_id, split=split)
        where = hook_source(self.env, "env_response")
        with gathering(Gathering(session.rollout_id)) as logs:
            try:
                raw = await session.run(self.env.env_response(rollout))
                return {"response": wire.env_response_value(raw), "logs": logs.take()}
            except (RolloutFailure, wire.WireError) as exc:
                return {**wire.hook_error("env_response", exc, where=where), "logs": logs.take()}
            except Exception as exc:
                engine_logger.exception("env_response raised %s", type(exc).__name__)
                frames = traceback.extract_tb(exc.__traceback__)
                at = f"{where}, raised at {shown_path(frames[-1].filename)}:{frames[-1].lineno}" if frames else where
                return {**wire.hook_error("env_response", exc, where=at), "logs": logs.take()}

    async def group_rewards(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``compute_group_rewards`` over a finished sibling group (their sessions are closed by now)."""
        items = body.get("rollouts")
        if not isinstance(items, list) or not items:
            raise wire.WireError("rollouts must be a non-empty list of rollouts")
        rollouts = [wire.rollout_from(item, f"rollouts[{index}]") for index, item in enumerate(items)]
        with gathering(Gathering(None)) as logs, group_context(rollout.rollout_id for rollout in rollouts):
            try:
                raw = await self.env.compute_group_rewards(rollouts)
                return {"rewards": wire.rewards_value(raw, "compute_group_rewards"), "logs": logs.take()}
            except (RolloutFailure, wire.WireError) as exc:  # the proxy's engine logs these, as a local one does
                return {**wire.hook_error("compute_group_rewards", exc), "logs": logs.take()}
            except Exception as exc:
                engine_logger.exception("compute_group_rewards raised %s", type(exc).__name__)
                return {**wire.hook_error("compute_group_rewards", exc), "logs": logs.take()}

    async def example(self, split: DatasetSplit, *, index: int | None, example_id: str | None) -> Example[Any]:
        try:
            return await self.pages.find(split, index=index, example_id=example_id)
        except LookupError as exc:
            raise wire.WireError(str(exc), wire.ErrorCode.NOT_FOUND) from None

    async def aclose(self) -> None:
        await self.sessions.close_all(grace=self.config.shutdown_grace)
        await self.env.aclose()
