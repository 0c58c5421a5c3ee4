"""Procedural reasoning tasks from the ``reasoning-gym`` package, scored by its own scorers.

The env is benchmax's reasoning-gym adapter (the ``reasoning-gym:TASK`` spec) with one
task chosen by name: ``train`` and ``eval`` come from two different seeds derived from
``seed`` (hashed, so the splits' generator streams do not overlap), ``train`` drops any
question that also occurs in ``eval``, and the text inside the last
``<answer>...</answer>`` is scored with the package's ``score_answer``.

    benchmax eval examples/reasoning_gym --env-arg task=countdown --env-arg size=32
    benchmax eval reasoning-gym:countdown --env-arg size=32      # the same env, as a spec
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmax import adapters

TASKS = (
    "basic_arithmetic",
    "chain_sum",
    "countdown",
    "word_sorting",
    "spell_backward",
    "letter_counting",
    "word_sequence_reversal",
    "number_sorting",
)
"""Tasks this example is tested with: they generate offline in well under a second per
64 examples (countdown: ~3 s) and their scorers accept their own reference answers."""


class ReasoningGymEnv(adapters.ReasoningGymEnv):
    """One ``reasoning-gym`` task: ``task`` (a registered name), ``seed``, ``size`` per split.

    ``config`` passes task options through to the generator (for example
    ``{"min_terms": 2, "max_terms": 3}`` for ``basic_arithmetic``).
    """

    def __init__(
        self,
        *,
        task: str = "basic_arithmetic",
        seed: int = 0,
        size: int = 64,
        config: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(tasks=(task,), seed=seed, size=size, config=config, **kwargs)
        self.task = task
