"""Per-rollout sessions: the env's ``rollout_context`` held open between calls, and always closed.

Each session runs the env's ``rollout_context`` in a task of its own, entered
when the session is made and exited when it ends, so a context that holds
cancel scopes or task groups (an MCP client, a sandbox) is entered and exited by
one task, as in a local run. A session ends by teardown (``DELETE``, a
WebSocket ``close``), when its WebSocket disconnects, when it has been idle
past its TTL (its client went away), or when the server shuts down: the
context is exited on every one of these ways out.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmax.envs import BaseEnv, DatasetSplit, Example, Tool
from benchmax.remote import wire
from benchmax.serve._capture import Gathering, gathering

logger = logging.getLogger("benchmax.serve")


class ContextFailed(Exception):
    """The env's ``rollout_context`` raised on its way in; ``error`` is what it raised."""

    def __init__(self, error: BaseException, logs: list[Any]) -> None:
        super().__init__(str(error))
        self.error = error
        self.logs = logs


class SessionError(Exception):
    """A session call that cannot be served: ``code`` and ``status`` say how the server answers."""

    def __init__(self, code: wire.ErrorCode, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(eq=False)
class Session:
    """One rollout's session: its example, its context task and its in-flight calls."""

    id: str
    rollout_id: str
    example: Example[Any]
    client: str = ""
    """Who opened it (the credential it authenticated with, :func:`benchmax.access.credential_of`):
    each counts against ``max_per_client``."""
    tools: list[Tool] = field(default_factory=list)
    split: DatasetSplit | None = None
    created_at: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.monotonic)
    busy: int = 0
    tool_calls: int = 0
    closing: bool = False
    enter_error: BaseException | None = None
    exit_error: BaseException | None = None
    context_logs: Gathering = field(init=False)
    _entered: asyncio.Event = field(default_factory=asyncio.Event)
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _owner: asyncio.Task[None] | None = None
    _calls: set[asyncio.Task[Any]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.context_logs = Gathering(self.rollout_id)

    def idle_seconds(self) -> float:
        return 0.0 if self.busy else time.monotonic() - self.last_seen

    def state(self) -> dict[str, Any]:
        """The session as ``GET /sessions/{id}`` and OpenEnv's ``state`` show it."""
        return {
            "session_id": self.id,
            "episode_id": self.rollout_id,
            "rollout_id": self.rollout_id,
            "example_id": self.example.id,
            "step_count": self.tool_calls,
            "created_at": self.created_at,
            "idle_seconds": round(self.idle_seconds(), 3),
            "closing": self.closing,
        }

    async def run(self, coro: Any) -> Any:
        """Await an env call of this session; teardown cancels it (a local run cancels it too)."""
        task = asyncio.ensure_future(coro)
        self._calls.add(task)
        try:
            return await task
        finally:
            self._calls.discard(task)


class SessionTable:
    """Every open session of one served env, with the TTL that ends abandoned ones."""

    def __init__(self, env: BaseEnv, *, ttl: float | None, max_sessions: int, max_per_client: int) -> None:
        self.env = env
        self.ttl = ttl
        self.max_sessions = max_sessions
        self.max_per_client = max_per_client
        self._sessions: dict[str, Session] = {}
        self._per_client: Counter[str] = Counter()
        self._by_rollout: dict[str, Session] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._expiring: set[asyncio.Task[Any]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._sessions)

    def start(self) -> None:
        if self.ttl is not None and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def open(
        self, rollout_id: str | None, example: Example[Any], *, client: str = ""
    ) -> tuple[Session, list[Any]]:
        """Enter the env's context for a new session of ``client`` (its credential); its logs come back.

        Raises :class:`SessionError` when the server or the client's share of it is full,
        or the rollout id has a session, and :class:`ContextFailed` when the context fails
        to enter. One client cannot take every session (and the memory their contexts
        hold, a sandbox each): its share is ``max_per_client`` (HTTP 429 past it).
        """
        if self._closed:
            raise SessionError(wire.ErrorCode.CAPACITY, "the server is shutting down", 503)
        if len(self._sessions) >= self.max_sessions:
            raise SessionError(
                wire.ErrorCode.CAPACITY,
                f"{self.max_sessions} sessions are open (--max-sessions); lower the client's concurrency",
                503,
            )
        if self._per_client[client] >= self.max_per_client:
            raise SessionError(
                wire.ErrorCode.CAPACITY,
                f"this client ({client}) has {self._per_client[client]} sessions open, its share of the server "
                "(--max-sessions-per-client); close one first or lower the client's concurrency",
                429,
            )
        rollout_id = rollout_id or f"session-{secrets.token_hex(8)}"
        if rollout_id in self._by_rollout:
            raise SessionError(wire.ErrorCode.CONFLICT, f"rollout {rollout_id!r} has an open session already", 409)
        session = Session(id=secrets.token_urlsafe(18), rollout_id=rollout_id, example=example, client=client)
        self._sessions[session.id] = session
        self._per_client[client] += 1
        self._by_rollout[rollout_id] = session
        session.busy += 1
        session._owner = asyncio.get_running_loop().create_task(self._hold(session), name=f"session {rollout_id}")
        waiter = asyncio.ensure_future(session._entered.wait())
        try:
            await asyncio.wait({session._owner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await self.close(session)
            raise
        finally:
            waiter.cancel()
            session.busy -= 1
            session.last_seen = time.monotonic()
        if session.enter_error is not None:
            self._forget(session)
            raise ContextFailed(session.enter_error, session.context_logs.take())
        return session, session.context_logs.take()

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(
                wire.ErrorCode.SESSION_NOT_FOUND,
                f"no session {session_id!r}: it was torn down, expired after {self.ttl:g}s idle, or never made"
                if self.ttl is not None
                else f"no session {session_id!r}: it was torn down or never made",
                404,
            )
        return session

    @asynccontextmanager
    async def use(self, session_id: str) -> AsyncIterator[Session]:
        """A session for one call: it cannot expire while the call runs."""
        session = self.get(session_id)
        if session.closing:
            raise SessionError(wire.ErrorCode.CONFLICT, f"session {session_id!r} is being torn down", 409)
        session.busy += 1
        session.last_seen = time.monotonic()
        try:
            yield session
        finally:
            session.busy -= 1
            session.last_seen = time.monotonic()

    def touch(self, session_id: str) -> Session:
        session = self.get(session_id)
        session.last_seen = time.monotonic()
        return session

    async def close(self, session: Session, *, why: str | None = None) -> tuple[BaseException | None, list[Any]]:
        """Exit the session's context (once, whoever asks first); its exit error and logs."""
        first = not session.closing
        session.closing = True
        if first:
            if why is not None:
                logger.warning("session of rollout %r: %s; tearing it down", session.rollout_id, why)
            for call in list(session._calls):
                call.cancel()
            if session._calls:
                await asyncio.gather(*session._calls, return_exceptions=True)
            session._release.set()
        if session._owner is not None:
            await asyncio.shield(session._owner)
        self._forget(session)
        return (session.exit_error, session.context_logs.take()) if first else (None, [])

    async def close_all(self, *, grace: float) -> None:
        """Shutdown: every context exited (those that overrun ``grace`` are cancelled, then exited)."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        if self._expiring:
            await asyncio.wait(set(self._expiring), timeout=grace)
        sessions = list(self._sessions.values())
        if not sessions:
            return
        logger.warning("shutting down: tearing down %d open session(s)", len(sessions))
        closing = [asyncio.ensure_future(self.close(session)) for session in sessions]
        _, pending = await asyncio.wait(closing, timeout=grace)
        for session in sessions:
            if session._owner is not None and not session._owner.done():
                session._owner.cancel()
        if pending:
            await asyncio.wait(pending, timeout=grace)

    def _forget(self, session: Session) -> None:
        if self._sessions.pop(session.id, None) is not None:
            self._per_client[session.client] -= 1
            if self._per_client[session.client] <= 0:
                del self._per_client[session.client]
        if self._by_rollout.get(session.rollout_id) is session:
            del self._by_rollout[session.rollout_id]

    async def _hold(self, session: Session) -> None:
        with gathering(session.context_logs):
            try:
                async with self.env.rollout_context(session.rollout_id, session.example):
                    session._entered.set()
                    await session._release.wait()
            except BaseException as exc:
                if not session._entered.is_set():
                    session.enter_error = exc
                else:
                    session.exit_error = exc
                    if not isinstance(exc, Exception):
                        logger.warning("the context of rollout %r was cancelled on its way out", session.rollout_id)
                if not isinstance(exc, Exception) and not session._entered.is_set():
                    raise

    async def _reap(self) -> None:
        assert self.ttl is not None
        interval = max(0.05, min(self.ttl / 4, 5.0))
        while True:
            await asyncio.sleep(interval)
            for session in list(self._sessions.values()):
                if not session.closing and session.idle_seconds() > self.ttl:
                    why = f"idle for more than {self.ttl:g}s (its client went away)"
                    task = asyncio.ensure_future(self.close(session, why=why))
                    self._expiring.add(task)
                    task.add_done_callback(self._expiring.discard)
