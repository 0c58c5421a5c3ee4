"""How a failed model request is retried: backoff with full jitter, bounded by a budget."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter, and a budget so retries cannot snowball.

    The budget allows ``budget_floor`` retries plus ``budget_ratio`` per request
    made; past it a retryable failure fails the rollout at once. Failures of the
    endpoint itself (nothing listening, every request failing) do not spend it:
    the endpoint's gate holds the requests until it answers again.
    """

    max_attempts: int = 5
    backoff_initial: float = 0.25
    backoff_max: float = 20.0
    retry_after_max: float = 60.0
    budget_ratio: float = 0.5
    budget_floor: int = 50

    def backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_max, self.backoff_initial * (2 ** (attempt - 1)))
        return random.uniform(0, ceiling)
