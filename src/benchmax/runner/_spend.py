"""What a run spends on model calls: kept in the run as it goes, and the ``--max-cost`` budget.

The run's figure is every call it made, across sessions: the earlier sessions'
(read back from the store when a run resumes) plus this session's, which the
executor's ledgers count as replies arrive (groups abandoned when a run stops
included: their calls were paid for). It is written to the run's ``cost``
metadata every few seconds and on every way out, so the inspector shows it
while the run goes and a resumed run starts from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmax.client import CallFigures, PriceTable, calls_from_meta, calls_to_meta, known_usd, merge_figures
from benchmax.runner._session import RunSession

_STORE_EVERY = 5.0
"""Seconds between writes of the running figure (the end of the run always writes it)."""


class RunSpend:
    """The run's model calls and cost; :meth:`over_budget` says why the run must stop, if it must."""

    def __init__(
        self,
        session: RunSession,
        current: Callable[[], tuple[CallFigures, ...]],
        prices: PriceTable,
        max_cost: float | None,
    ) -> None:
        self.session = session
        self.prices = prices
        self.max_cost = max_cost
        self._current = current
        self._previous = calls_from_meta(session.run_meta().cost)
        self._stored_at = time.monotonic()

    def figures(self) -> tuple[CallFigures, ...]:
        return merge_figures(self._previous, self._current())

    def to_meta(self) -> dict[str, Any]:
        figures = self.figures()
        return {**calls_to_meta(figures), "prices": self.prices.describe({item.model for item in figures})}

    def store(self) -> None:
        self._stored_at = time.monotonic()
        self.session.update_meta(cost=self.to_meta())

    def due(self) -> bool:
        return time.monotonic() - self._stored_at >= _STORE_EVERY

    def over_budget(self) -> str | None:
        """Why the run must stop for ``--max-cost`` (spent it, or a call whose cost is unknown); ``None``: go on."""
        if self.max_cost is None:
            return None
        figures = self.figures()
        unknown = next((item for item in figures if item.usd is None), None)
        if unknown is not None:
            return (
                f"the {unknown.role} model {unknown.model!r} has no price in the price table, so --max-cost "
                f"${self.max_cost:g} cannot be kept; add it to a price file (--prices FILE)"
            )
        spent = known_usd(figures)
        if spent >= self.max_cost:
            return f"the run spent ${spent:.4f} on model calls, reaching --max-cost ${self.max_cost:g}"
        return None
