"""What a judge scores: rubrics, their criteria, and a judge's grade.

One ``Rubric`` class serves both ways of writing one:

- benchmax 0.2's titled rubric, ``Rubric(title, description, polarity="positive",
  score_map=None)``: one criterion that a judge scores on ``score_map``'s keys
  (``0``/``1`` when omitted), normalised by :meth:`Rubric.reward_for`. The rubric
  functions (``evaluate_single_rubric``, ``score_rubrics``, ...) take these.
- a set of criteria, ``Rubric((Criterion(...), ...), name="quality")``: several
  integer-scaled criteria graded in one call by :meth:`Judge.grade`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

RubricPolarity = Literal["positive", "negative"]
"""A ``positive`` rubric rewards showing the quality; a ``negative`` one rewards avoiding the fault."""

Polarity = RubricPolarity

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_BINARY = (0.0, 1.0)


@dataclass(frozen=True, slots=True)
class Criterion:
    """One thing the judge scores, as an integer on ``scale`` (inclusive).

    A ``negative`` criterion describes a fault ("states facts not in the
    source"): a high score there *lowers* the total. ``scale=(0, 1)`` makes a
    yes/no criterion.
    """

    name: str
    description: str
    weight: float = 1.0
    polarity: Polarity = "positive"
    scale: tuple[int, int] = (0, 10)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                f"criterion name {self.name!r} must start with a letter and use only letters, "
                "digits, '_' or '-' (64 characters at most)"
            )
        if not self.description.strip():
            raise ValueError(f"criterion {self.name!r} needs a description the judge can apply")
        if self.polarity not in ("positive", "negative"):
            raise ValueError(f"criterion {self.name!r}: polarity must be 'positive' or 'negative'")
        low, high = self.scale
        if not (isinstance(low, int) and isinstance(high, int) and low < high):
            raise ValueError(f"criterion {self.name!r}: scale must be two integers (low, high) with low < high")
        if not self.weight > 0:
            raise ValueError(f"criterion {self.name!r}: weight must be positive, got {self.weight!r}")

    def normalize(self, score: float) -> float:
        """The raw score mapped to 0..1 on this criterion's scale."""
        low, high = self.scale
        return (score - low) / (high - low)


@dataclass(frozen=True, init=False)
class Rubric:
    """A titled criterion (benchmax 0.2) or a named set of criteria; see the module doc.

    ``Rubric("Accuracy", "States the right capital")`` and
    ``Rubric(title="Accuracy", description=..., score_map={0: "wrong", 1: "right"})``
    make titled rubrics; ``Rubric((Criterion(...),), name="quality",
    instructions=...)`` or ``Rubric(criteria=...)`` make a set. A set's ``title``
    is its ``name`` and its ``description`` its instructions (or the criteria).
    """

    title: str
    description: str
    polarity: RubricPolarity = "positive"
    score_map: Mapping[float, str] | None = None
    # Not constructor fields for dataclasses.replace: replacing a titled rubric's title stays titled.
    criteria: tuple[Criterion, ...] = field(default=(), init=False)
    name: str = field(default="rubric", init=False)
    instructions: str = field(default="", init=False)

    def __init__(
        self,
        title_or_criteria: str | Sequence[Criterion] | None = None,
        description: str | None = None,
        polarity: RubricPolarity = "positive",
        score_map: Mapping[float, str] | None = None,
        *,
        title: str | None = None,
        criteria: Sequence[Criterion] | None = None,
        name: str | None = None,
        instructions: str = "",
    ) -> None:
        if isinstance(title_or_criteria, str):
            if title is not None:
                raise TypeError("Rubric got its title twice (positionally and as title=)")
            title = title_or_criteria
        elif title_or_criteria is not None:
            if criteria is not None:
                raise TypeError("Rubric got its criteria twice (positionally and as criteria=)")
            criteria = title_or_criteria
        if criteria is not None:
            if title is not None or description is not None or score_map is not None:
                raise TypeError(
                    "a Rubric is either a set of criteria (criteria=, name=, instructions=) or a titled "
                    "criterion (title, description, polarity, score_map), not both"
                )
            self._init_criteria(tuple(criteria), name or "rubric", instructions)
        else:
            if name is not None or instructions:
                raise TypeError("name= and instructions= belong to a Rubric of criteria; a titled rubric has a title")
            self._init_titled(title, description, polarity, score_map)

    def _init_criteria(self, criteria: tuple[Criterion, ...], name: str, instructions: str) -> None:
        if not criteria:
            raise ValueError(f"rubric {name!r} needs at least one criterion")
        if not all(isinstance(criterion, Criterion) for criterion in criteria):
            raise TypeError(f"rubric {name!r}: criteria must be Criterion objects")
        names = [criterion.name for criterion in criteria]
        duplicates = sorted({item for item in names if names.count(item) > 1})
        if duplicates:
            raise ValueError(f"rubric {name!r} repeats criteria {duplicates}")
        values = {
            "title": name,
            "description": instructions.strip() or _describe(criteria),
            "polarity": "positive",
            "score_map": None,
            "criteria": criteria,
            "name": name,
            "instructions": instructions,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def _init_titled(
        self,
        title: str | None,
        description: str | None,
        polarity: str,
        score_map: Mapping[float, str] | None,
    ) -> None:
        if not isinstance(title, str) or not title.strip():
            raise ValueError("rubric title must be non-empty")
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"rubric {title!r}: description must be non-empty")
        if polarity not in ("positive", "negative"):
            raise ValueError(f"rubric {title!r}: polarity must be 'positive' or 'negative', got {polarity!r}")
        if score_map is not None:
            if not isinstance(score_map, Mapping):
                raise TypeError(f"rubric {title!r}: score_map must map scores to descriptions")
            if len(score_map) < 2:
                raise ValueError(f"rubric {title!r}: score_map must contain at least two scores")
            for score, meaning in score_map.items():
                if isinstance(score, bool) or not isinstance(score, int | float):
                    raise TypeError(f"rubric {title!r}: score_map keys must be numeric, got {score!r}")
                if not math.isfinite(float(score)):
                    raise ValueError(f"rubric {title!r}: score_map keys must be finite")
                if not isinstance(meaning, str) or not meaning.strip():
                    raise ValueError(f"rubric {title!r}: score_map descriptions must be non-empty")
        values = {
            "title": title,
            "description": description,
            "polarity": polarity,
            "score_map": score_map,
            "criteria": (),
            "name": title,
            "instructions": "",
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @property
    def titled(self) -> bool:
        """Whether this is a single titled criterion (not a set of criteria)."""
        return not self.criteria

    @property
    def allowed_scores(self) -> tuple[float, ...]:
        """The raw scores a judge may give, ascending."""
        self._require_titled("allowed_scores")
        if self.score_map is None:
            return _BINARY
        return tuple(sorted(float(score) for score in self.score_map))

    def reward_for(self, raw_score: float) -> float:
        """An allowed raw score as a reward in ``[0, 1]``, inverted for a negative rubric."""
        if isinstance(raw_score, bool) or not isinstance(raw_score, int | float):
            raise TypeError(f"raw_score must be numeric, got {type(raw_score).__name__}")
        allowed = self.allowed_scores
        value = float(raw_score)
        if not math.isfinite(value) or value not in allowed:
            raise ValueError(f"raw_score must be one of {list(allowed)}, got {raw_score!r}")
        fraction = (value - allowed[0]) / (allowed[-1] - allowed[0])
        return fraction if self.polarity == "positive" else 1.0 - fraction

    def schema(self) -> dict[str, object]:
        """The JSON Schema a :meth:`Judge.grade` reply must match: one ``{reason, score}`` per criterion."""
        self._require_criteria("schema()")
        properties = {
            criterion.name: {
                "type": "object",
                "properties": {
                    "reason": {"type": "string"},
                    "score": {
                        "type": "integer",
                        "minimum": criterion.scale[0],
                        "maximum": criterion.scale[1],
                    },
                },
                "required": ["reason", "score"],
                "additionalProperties": False,
            }
            for criterion in self.criteria
        }
        return {
            "type": "object",
            "properties": properties,
            "required": [criterion.name for criterion in self.criteria],
            "additionalProperties": False,
        }

    def describe(self) -> str:
        self._require_criteria("describe()")
        return _describe(self.criteria)

    def _require_titled(self, what: str) -> None:
        if self.criteria:
            raise TypeError(
                f"rubric {self.name!r} is a set of criteria, which has no {what}; grade it with "
                "Judge.grade, or write Rubric(title, description) for the rubric functions"
            )

    def _require_criteria(self, what: str) -> None:
        if not self.criteria:
            raise TypeError(
                f"rubric {self.title!r} is a titled rubric, which has no {what}; score it with "
                "evaluate_single_rubric/score_rubrics, or write Rubric((Criterion(...),)) for Judge.grade"
            )


def _describe(criteria: Sequence[Criterion]) -> str:
    lines = []
    for criterion in criteria:
        low, high = criterion.scale
        sense = "higher means better" if criterion.polarity == "positive" else "higher means the fault is more present"
        lines.append(f"- {criterion.name} (integer {low}..{high}, {sense}): {criterion.description}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Grade:
    """A judge's verdict on one answer under one rubric of criteria."""

    rubric: Rubric
    scores: Mapping[str, int]
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def components(self) -> dict[str, float]:
        """Each criterion's score in 0..1, negated for negative criteria."""
        return {
            criterion.name: (1.0 if criterion.polarity == "positive" else -1.0)
            * criterion.normalize(self.scores[criterion.name])
            for criterion in self.rubric.criteria
        }

    @property
    def total(self) -> float:
        """Weighted sum of :attr:`components` over the positive weights.

        1.0 is a perfect answer with no faults; faults pull it down, below zero
        if they outweigh the merits. A rubric of only negative criteria spans
        -1.0..0.0.
        """
        components = self.components
        positive = sum(c.weight for c in self.rubric.criteria if c.polarity == "positive")
        scale = positive or sum(c.weight for c in self.rubric.criteria)
        return sum(c.weight * components[c.name] for c in self.rubric.criteria) / scale

    def rewards(self, *, breakdown: bool = True) -> dict[str, float]:
        """``{rubric.name: total}`` plus ``{"rubric.criterion": component}`` when ``breakdown``."""
        rewards = {self.rubric.name: self.total}
        if breakdown:
            rewards.update({f"{self.rubric.name}.{name}": value for name, value in self.components.items()})
        return rewards
