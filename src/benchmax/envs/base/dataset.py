"""JSON Lines datasets (0.2.x's ``benchmax.envs.base`` path): one JSON object per line.

``JsonlDataset(path, row_to_example=..., max_examples=...)`` reads the file once,
stopping after ``max_examples`` rows, so a validation run over a 1 GB file reads
a few kilobytes. Each row goes through ``row_to_example`` (the identity by
default), which returns an :class:`~benchmax.envs.Example` or a payload dict; a
payload's id is its content hash. It is generic and subclassable as in 0.2.x:
``class MathDataset(JsonlDataset[JsonRow])``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import EllipsisType
from typing import Any, TypeVar

import orjson

from benchmax.envs._errors import DatasetError, DatasetNotFound, DatasetRowTypeError
from benchmax.envs._types import JsonRow
from benchmax.envs.dataset import Dataset, convert_row, resolve_under, validate_max_examples
from benchmax.envs.shared_types import Example

__all__ = [
    "JsonRow",
    "JsonlDataset",
    "collect_dataset_problems",
    "collecting_dataset_problems",
    "resolve_dataset_path",
]

Payload = TypeVar("Payload")
RowToExample = Callable[[JsonRow], "Example[Any] | Mapping[str, Any]"]
_PROBLEMS: ContextVar[list[DatasetError] | None] = ContextVar("benchmax_dataset_problems", default=None)


@contextmanager
def collect_dataset_problems() -> Iterator[list[DatasetError]]:
    """Inside, a ``JsonlDataset`` skips each unusable line and records why, instead of stopping.

    ``benchmax validate`` reads datasets this way so it can report every bad line
    of a file, each with its ``file:line``, not only the first.
    """
    problems: list[DatasetError] = []
    token = _PROBLEMS.set(problems)
    try:
        yield problems
    finally:
        _PROBLEMS.reset(token)


def collecting_dataset_problems() -> list[DatasetError] | None:
    """Where a dataset read inside ``collect_dataset_problems`` records each bad row, else ``None`` (stop at it)."""
    return _PROBLEMS.get()


def resolve_dataset_path(base_dir: Path, relative_path: str) -> Path:
    """A dataset file named relative to ``base_dir``, refused if absolute or outside it (0.2.x)."""
    if Path(relative_path).is_absolute():
        raise ValueError("dataset paths must be relative to base_dir")
    try:
        return resolve_under(Path(base_dir).expanduser(), relative_path)
    except DatasetError as exc:
        raise ValueError(f"dataset paths must stay within base_dir ({exc})") from None


class JsonlDataset(Dataset[Payload]):
    """Examples read from a JSON Lines file.

    Errors name ``file:line``. An error raised by ``row_to_example`` keeps its
    type and gains a note naming the line, so env code that catches its own
    exceptions still can. With ``base_dir`` the path must resolve inside it (see
    :func:`~benchmax.envs.resolve_under`).
    """

    def __init__(
        self,
        path: str | Path,
        row_to_example: RowToExample | EllipsisType | None = None,
        max_examples: int | None = None,
        *,
        base_dir: str | Path | None = None,
    ) -> None:
        self._max_examples = validate_max_examples(max_examples)
        self.path = Path(path) if base_dir is None else resolve_under(base_dir, path)
        # ``row_to_example=...`` is how the spec's own example spells "the default".
        self._row_to_example = None if row_to_example is Ellipsis else row_to_example
        self._lines: list[int] = []
        self._examples = tuple(self._read())

    def source_files(self) -> tuple[Path, ...]:
        """The file the examples are read from (a run's provenance hashes it)."""
        return (self.path,)

    def line_of(self, index: int) -> int:
        """The file line example ``index`` was read from, so later checks can name ``file:line``."""
        return self._lines[index]

    def _read(self) -> Iterator[Example[Any]]:
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            raise DatasetNotFound(f"{self.path}: dataset file not found") from None
        except IsADirectoryError:
            raise DatasetError(f"{self.path}: is a directory, expected a .jsonl file") from None
        count = 0
        problems = _PROBLEMS.get()
        with handle:
            for line_number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                where = f"{self.path}:{line_number}"
                try:
                    example = self._example(raw, where)
                except DatasetError as exc:
                    if problems is None:
                        raise
                    problems.append(exc)
                    continue
                except Exception as exc:
                    if problems is None:
                        raise
                    problems.append(DatasetError(f"{where}: row_to_example raised {type(exc).__name__}: {exc}"))
                    continue
                self._lines.append(line_number)
                yield example
                count += 1
                if self._max_examples is not None and count >= self._max_examples:
                    return

    def _example(self, raw: bytes, where: str) -> Example[Any]:
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{where}: invalid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise DatasetRowTypeError(f"{where}: each line must be a JSON object, got {type(row).__name__}")
        return convert_row(row, self._row_to_example, where=where)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, {len(self)} examples)"
