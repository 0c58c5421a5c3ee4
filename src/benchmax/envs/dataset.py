"""Finite datasets of examples, and the streaming JSONL reader envs use."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any, Protocol, runtime_checkable

import orjson

from benchmax.envs.errors import DatasetError
from benchmax.envs.identity import canonical_example_id
from benchmax.envs.types import Example

RowToExample = Callable[[dict[str, Any]], "Example | Mapping[str, Any]"]


@runtime_checkable
class Dataset(Protocol):
    """A finite, deterministic sequence of examples."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Example: ...

    def __iter__(self) -> Iterator[Example]: ...


class ListDataset:
    """An in-memory dataset: the simplest ``Dataset`` for envs that generate examples."""

    def __init__(self, examples: Sequence[Example | Mapping[str, Any]]) -> None:
        items = []
        for index, item in enumerate(examples):
            items.append(to_example(item, where=f"example[{index}]"))
        self._examples: tuple[Example, ...] = tuple(items)

    def __len__(self) -> int:
        return len(self._examples)

    def __getitem__(self, index: int) -> Example:
        return self._examples[index]

    def __iter__(self) -> Iterator[Example]:
        return iter(self._examples)

    def __repr__(self) -> str:
        return f"ListDataset({len(self)} examples)"


class JsonlDataset:
    """Examples read from a JSON Lines file, one object per line.

    The file is streamed: with ``max_examples`` only that many rows are parsed, so
    a validation run over a 1 GB file reads a few kilobytes. Each row goes through
    ``row_to_example`` (identity by default), which returns an :class:`Example` or a
    payload dict; a payload's id is its canonical content hash. With ``base_dir``
    the path must resolve inside it (see :func:`resolve_under`).
    """

    def __init__(
        self,
        path: str | Path,
        row_to_example: RowToExample | EllipsisType | None = None,
        max_examples: int | None = None,
        *,
        base_dir: str | Path | None = None,
    ) -> None:
        if max_examples is not None and (
            isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 0
        ):
            raise ValueError(f"max_examples must be a non-negative int or None, got {max_examples!r}")
        self.path = Path(path) if base_dir is None else resolve_under(base_dir, path)
        # ``row_to_example=...`` is how the spec's own example spells "the default".
        self._row_to_example = None if row_to_example is Ellipsis else row_to_example
        self._max_examples = max_examples
        self._examples = tuple(self._read())

    def _read(self) -> Iterator[Example]:
        if self._max_examples == 0:
            return
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            raise DatasetError(f"{self.path}: dataset file not found") from None
        except IsADirectoryError:
            raise DatasetError(f"{self.path}: is a directory, expected a .jsonl file") from None
        count = 0
        seen: dict[str, int] = {}
        with handle:
            for line_number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                where = f"{self.path}:{line_number}"
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise DatasetError(f"{where}: invalid JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise DatasetError(
                        f"{where}: each line must be a JSON object, got {type(row).__name__}"
                    )
                if self._row_to_example is not None:
                    try:
                        converted = self._row_to_example(row)
                    except DatasetError as exc:
                        raise DatasetError(f"{where}: {exc}") from exc
                    except Exception as exc:
                        raise DatasetError(
                            f"{where}: row_to_example raised {type(exc).__name__}: {exc}"
                        ) from exc
                else:
                    converted = row
                example = to_example(converted, where=where)
                if example.id in seen:
                    raise DatasetError(
                        f"{where}: duplicate example id {example.id!r} "
                        f"(first seen on line {seen[example.id]}); ids must be unique per split"
                    )
                seen[example.id] = line_number
                yield example
                count += 1
                if self._max_examples is not None and count >= self._max_examples:
                    return

    def __len__(self) -> int:
        return len(self._examples)

    def __getitem__(self, index: int) -> Example:
        return self._examples[index]

    def __iter__(self) -> Iterator[Example]:
        return iter(self._examples)

    def __repr__(self) -> str:
        return f"JsonlDataset({str(self.path)!r}, {len(self)} examples)"


def resolve_under(base_dir: str | Path, name: str | Path) -> Path:
    """``name`` resolved against ``base_dir``, refused unless it stays inside ``base_dir``.

    Dataset names often come from configs or CLI flags; ``../`` segments, absolute
    paths and symlinks are followed first (``Path.resolve``) and the result must
    still lie under the resolved ``base_dir``, so none of them can reach other files.
    """
    base = Path(base_dir).resolve()
    target = (base / name).resolve()
    if not target.is_relative_to(base):
        raise DatasetError(f"{name}: resolves to {target}, outside the data directory {base}; refusing to read it")
    return target


def to_example(item: object, *, where: str) -> Example:
    """Normalise what a dataset yields into a validated :class:`Example`."""
    if isinstance(item, Example):
        example = item
    elif isinstance(item, Mapping):
        payload = dict(item)
        try:
            example = Example(canonical_example_id(payload), payload)
        except TypeError as exc:
            raise DatasetError(f"{where}: payload is not JSON-serialisable ({exc})") from None
    else:
        raise DatasetError(
            f"{where}: expected an Example or a payload dict, got {type(item).__name__}"
        )
    check_prompt_messages(example.payload, where=where)
    return example


def check_prompt_messages(payload: Mapping[str, Any], *, where: str) -> None:
    """Raise :class:`DatasetError` unless ``payload`` has usable ``prompt_messages``."""
    messages = payload.get("prompt_messages")
    if not isinstance(messages, list) or not messages:
        raise DatasetError(
            f"{where}: payload needs a non-empty 'prompt_messages' list of "
            "{role, content} messages"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise DatasetError(f"{where}: prompt_messages[{index}] must be an object")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise DatasetError(f"{where}: prompt_messages[{index}] needs a string 'role'")
        if "content" not in message:
            raise DatasetError(f"{where}: prompt_messages[{index}] needs 'content'")
        content = message["content"]
        if not (content is None or isinstance(content, str | list)):
            raise DatasetError(
                f"{where}: prompt_messages[{index}].content must be a string or a "
                f"list of content parts, got {type(content).__name__}"
            )
