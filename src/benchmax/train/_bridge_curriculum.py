"""The training bridge's curriculum steps: drawing each group's example from the sampler, telling
it every scored group, keeping its state and figures with each step, restoring it on resume.

Every sampler hook goes through ``_call``, so whatever a user's sampler raises stops the run with
an error that names the hook (and how to resume a stored run once it is fixed).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from benchmax.engine import GroupResult
from benchmax.envs import Example
from benchmax.runner import RunSession
from benchmax.train._curriculum import CurriculumError, ExamplePool, GroupScore, Sampler
from benchmax.train._groups import ExampleSampler, rollout_score

logger = logging.getLogger("benchmax.train")

T = TypeVar("T")


class _CurriculumSteps:
    """``RolloutBridge``'s curriculum methods; the bridge's fields are the attributes they read."""

    examples: Mapping[str, Example]
    example_index: Mapping[str, int]
    session: RunSession | None
    drop_unscorable: bool
    curriculum: Sampler | None
    pool: ExamplePool | None
    _curriculum_started: bool
    sampler: Callable[[], ExampleSampler]

    def _draw(self, step: int) -> Example:
        """The example of the next group: the curriculum's pick (checked), or the next of the epoch."""
        if self.curriculum is None:
            return self.examples[self.sampler().next()]
        assert self.pool is not None
        if not self._curriculum_started:
            self._curriculum_started = True
            self._restore_curriculum(step)
        picked = self._call("draw", self.curriculum.draw, self.pool, step)
        example_id = picked if isinstance(picked, str) else getattr(picked, "id", None)
        example = self.pool.get(example_id) if isinstance(example_id, str) else None
        if example is None:
            raise CurriculumError(
                f"the curriculum's sampler ({self.curriculum.describe()}) returned {str(picked)[:120]!r} at step "
                f"{step + 1}, which is no example of this run: return an example the pool handed out "
                "(pool.ids, pool.ids_of(env), pool.generated(env, i), pool.at_level(env, level, i)) or its id"
                + self._resumable()
            )
        if example.id not in self.examples:
            # generated (an endless dataset, a difficulty level): run and stored like the others
            if isinstance(self.examples, dict):
                self.examples[example.id] = example
            self.example_index[example.id] = self.pool.position(example.id)  # type: ignore[index]
        return example

    def _observe(
        self, example: Example, result: GroupResult, dead: bool, weights: Mapping[str, float], step: int
    ) -> None:
        assert self.curriculum is not None
        scores = tuple(
            rollout_score(outcome, weights) for outcome in result.outcomes if outcome.scored or not self.drop_unscorable
        )
        self._call("update", self.curriculum.update, GroupScore(example, step, scores, dead))

    async def _curriculum_step(self, step: int) -> dict[str, float]:
        """The curriculum's figures for the step, and its state kept in the run store."""
        assert self.curriculum is not None and self.pool is not None
        figures = self._call("figures", self.curriculum.figures)
        state = self._call("state", self.curriculum.state)
        try:
            flat = {str(name): float(value) for name, value in dict(figures).items()}
            encoded = json.loads(json.dumps(state, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise CurriculumError(
                f"the curriculum's sampler ({self.curriculum.describe()}) gave figures or state that are not "
                f"plain numbers / JSON at step {step + 1}: {exc}" + self._resumable()
            ) from None
        if self.session is not None:
            await asyncio.to_thread(
                self.session.record_sampler_state, step, {"sampler": self.curriculum.describe(), "state": encoded}
            )
        return flat

    async def _store_new_examples(self) -> None:
        """Examples the curriculum drew that the run has not stored (an endless dataset's, a level's),
        stored before their groups."""
        assert self.pool is not None and self.session is not None
        new = self.pool.take_new()
        if new:
            examples = [example for _, example in new]
            await asyncio.to_thread(self.session.add_examples, "train", examples, start=new[0][0])

    def _restore_curriculum(self, step: int) -> None:
        """A resumed run: the state the curriculum had after the step before ``step``."""
        assert self.curriculum is not None
        if self.session is None or not self.session.resumed:
            return
        stored = self.session.sampler_state(before=step)
        if stored is None:
            return
        kept_step, record = stored
        self._call("load_state", self.curriculum.load_state, dict(record.get("state") or {}))
        logger.info("curriculum %s: resumed with its state after step %d", self.curriculum.describe(), kept_step + 1)

    def _call(self, what: str, method: Callable[..., T], *args: Any) -> T:
        """A sampler hook; whatever it raises stops the run with an error that names it."""
        try:
            return method(*args)
        except CurriculumError:
            raise
        except Exception as exc:
            assert self.curriculum is not None
            raise CurriculumError(
                f"the curriculum's sampler ({self.curriculum.describe()}) raised in {what}(): "
                f"{type(exc).__name__}: {exc}" + self._resumable()
            ) from exc

    def _resumable(self) -> str:
        if self.session is None:
            return ""
        return f"; the run is stored: fix the sampler, then benchmax train --resume {self.session.run_dir}"
