"""The driver's one view of the servers' outages in a Ray run, merged from every actor's gates.

Each Ray actor keeps its own client pool and so its own gates; the driver follows their outage
events and folds them here into what the run store and the live progress show, as a single
process's pool would report them. Nothing here needs Ray: it is plain bookkeeping over events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchmax.client import GateEvent, Outage

logger = logging.getLogger("benchmax.runner")


class _MergedOutages:
    """The driver's view of the servers' outages, merged from every actor's gates.

    A server is down for the run from the first actor's gate tripping to the
    last one's recovering; the requests held and rerouted are summed over the
    actors. Stopping the run is the actors' call (a group that comes back as
    :class:`EndpointDown`), so :meth:`failed` never says so by itself.
    """

    def __init__(self) -> None:
        self._listeners: list[Any] = []
        self._down: dict[str, dict[int, Outage]] = {}
        """Per server, the outage each actor's gate is in."""
        self._done: dict[str, tuple[int, int]] = {}
        """Per server, requests held and rerouted by actors already back, in the current outage."""
        self._current: dict[str, Outage] = {}
        self._ended: list[Outage] = []
        self._waiting: dict[int, dict[str, int]] = {}

    def subscribe(self, listener: Any) -> None:
        self._listeners.append(listener)

    def outages(self) -> list[Outage]:
        return [*self._ended, *self._current.values()]

    def waiting(self, base_url: str) -> int:
        return sum(counts.get(base_url, 0) for counts in self._waiting.values())

    def failed(self, base_url: str) -> bool:
        return False

    def actor_events(self, actor: int, events: Sequence[tuple[GateEvent, Outage]], waiting: dict[str, int]) -> None:
        self._waiting[actor] = waiting
        for event, outage in events:
            if event == "up":
                self._actor_back(actor, outage.endpoint, outage.ended_at or time.time(), outage)
            else:
                self._actor_down(actor, event, outage)

    def actor_lost(self, actor: int) -> None:
        """An actor died: what it saw down is no longer held by it."""
        self._waiting.pop(actor, None)
        for url, per_actor in list(self._down.items()):
            outage = per_actor.get(actor)
            if outage is not None:
                self._actor_back(actor, url, time.time(), outage)

    def _actor_down(self, actor: int, event: GateEvent, outage: Outage) -> None:
        url = outage.endpoint
        per_actor = self._down.setdefault(url, {})
        per_actor[actor] = outage
        merged = self._current.get(url)
        if merged is None:
            merged = self._reopen(url, outage) or Outage(url, started_at=outage.started_at, cause=outage.cause)
            self._done.setdefault(url, (0, 0))
        held, rerouted = self._done[url]
        merged = replace(
            merged,
            held=held + sum(item.held for item in per_actor.values()),
            rerouted=rerouted + sum(item.rerouted for item in per_actor.values()),
            failed=merged.failed or outage.failed,
            error=outage.error or merged.error,
        )
        self._current[url] = merged
        self._emit(event, merged)

    def _reopen(self, url: str, outage: Outage) -> Outage | None:
        """An actor's gate went on with an outage that had ended (down again right after coming back)."""
        for index in range(len(self._ended) - 1, -1, -1):
            ended = self._ended[index]
            if ended.endpoint == url and ended.ended_at is not None and outage.started_at <= ended.ended_at:
                del self._ended[index]
                return replace(ended, ended_at=None)
        self._done[url] = (0, 0)
        return None

    def _actor_back(self, actor: int, url: str, when: float, outage: Outage) -> None:
        per_actor = self._down.get(url, {})
        per_actor.pop(actor, None)
        held, rerouted = self._done.get(url, (0, 0))
        self._done[url] = (held + outage.held, rerouted + outage.rerouted)
        merged = self._current.get(url)
        if merged is None or per_actor:
            return
        held, rerouted = self._done.pop(url)
        ended = replace(merged, ended_at=when, held=held, rerouted=rerouted)
        del self._current[url]
        self._ended.append(ended)
        self._emit("up", ended)

    def _emit(self, event: GateEvent, outage: Outage) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, outage)
            except Exception:
                logger.exception("a listener of the Ray executor's outages failed")
