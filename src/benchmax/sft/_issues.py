"""Diagnostics of ``benchmax-sft-v1`` validation: every problem, in document order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmax.envs import DatasetError

_SHOWN = 20


@dataclass(frozen=True, slots=True)
class SftIssue:
    """One problem at one place.

    ``location`` is a path into the row, ``$`` being the row itself
    (``$.messages[2].weight``). ``line`` is the 1-based line of a JSONL file
    (``None`` for in-memory rows); ``row`` the 0-based row index (``None`` for
    problems of the whole dataset, such as having no rows).
    """

    message: str
    location: str
    line: int | None = None
    row: int | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form with stable keys, for golden files and APIs."""
        return {"line": self.line, "location": self.location, "message": self.message, "row": self.row}

    def describe(self) -> str:
        """``line 3 row 2 $.messages[0].content: content must be a string``."""
        origin = []
        if self.line is not None:
            origin.append(f"line {self.line}")
        if self.row is not None:
            origin.append(f"row {self.row}")
        origin.append(f"{self.location}: {self.message}")
        return " ".join(origin)


class SftDatasetError(DatasetError):
    """The input is not a valid ``benchmax-sft-v1`` dataset; ``issues`` lists every reason.

    A ``ValueError``, as in benchmax 0.2. The message shows the first 20
    issues; equivalent inputs always give the same issues in the same order.
    """

    def __init__(self, issues: Sequence[SftIssue]) -> None:
        self.issues: tuple[SftIssue, ...] = tuple(issues)
        if not self.issues:
            raise ValueError("SftDatasetError needs at least one issue")
        lines = [f"invalid benchmax-sft-v1 dataset: {len(self.issues)} issue(s)"]
        lines.extend(f"  {issue.describe()}" for issue in self.issues[:_SHOWN])
        if len(self.issues) > _SHOWN:
            lines.append(f"  ... and {len(self.issues) - _SHOWN} more")
        super().__init__("\n".join(lines))

    def __reduce__(self) -> tuple[type[SftDatasetError], tuple[tuple[SftIssue, ...]]]:
        return (type(self), (self.issues,))
