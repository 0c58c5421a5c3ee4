"""Finite datasets of examples (0.2.x's module path).

A :class:`Dataset` is a fixed, ordered collection: ``len``, indexing and
iteration. Build one from examples (or payload dicts, which get their content
hash as id), or subclass it for a dataset that reads lazily.

JSON Lines datasets (0.2.x's ``benchmax.envs.base.dataset``, served from here):
``JsonlDataset(path, row_to_example=..., max_examples=...)`` reads the file once,
stopping after ``max_examples`` rows, so a validation run over a 1 GB file reads
a few kilobytes. Each row goes through ``row_to_example`` (the identity by
default), which returns an :class:`~benchmax.envs.Example` or a payload dict; a
payload's id is its content hash. It is generic and subclassable as in 0.2.x:
``class MathDataset(JsonlDataset[JsonRow])``.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import EllipsisType
from typing import Any, Generic, TypeVar, overload

import orjson

from benchmax.envs._errors import DatasetError, DatasetNotFound, DatasetRowTypeError
from benchmax.envs._records import Example, JsonRow
from benchmax.envs.identity import identify, is_plain_json, plain_example_id

__all__ = [
    "Dataset",
    "JsonRow",
    "JsonlDataset",
    "ListDataset",
    "collect_dataset_problems",
    "collecting_dataset_problems",
    "resolve_dataset_path",
    "resolve_under",
    "validate_max_examples",
]

Payload = TypeVar("Payload")


def validate_max_examples(max_examples: int | None) -> int | None:
    """The optional limit on how many examples a dataset loads: a positive int or ``None``."""
    if max_examples is None:
        return None
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples <= 0:
        raise ValueError(f"max_examples must be a positive integer or None, got {max_examples!r}")
    return max_examples


class Dataset(Generic[Payload]):
    """A fixed, ordered collection of examples, snapshotted at construction.

    Items may be :class:`Example` objects or payload mappings; a payload's id is
    its :func:`canonical_example_id`. Repeated examples are kept: the runner
    tells repeats apart.
    """

    def __init__(self, examples: Sequence[Example[Payload] | Mapping[str, Any]] = ()) -> None:
        packed = PackedExamples()
        with collector_paused():
            for index, item in enumerate(examples):
                if item.__class__ is dict:  # a payload row, the usual case: packed as it is, not copied first
                    packed.add_row(item, index=index)
                else:
                    example, plain = _identified(item, where=f"example[{index}]")
                    packed.append(example, plain=plain)
        self._packed = packed

    @property
    def _examples(self) -> Sequence[Example[Payload]]:
        """The examples, held packed (0.2.x's attribute: its subclasses set and read it)."""
        return self._packed

    @_examples.setter
    def _examples(self, examples: Iterable[Example[Payload]]) -> None:
        self._packed = PackedExamples(examples)

    def __len__(self) -> int:
        return len(self._packed)

    def __getitem__(self, index: int) -> Example[Payload]:
        return self._packed[index]

    def __iter__(self) -> Iterator[Example[Payload]]:
        return iter(self._packed)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} examples)"

    def _known_ids(self) -> Sequence[str] | None:
        """The examples' ids in order, when they are known without reading a payload: a resumed
        run compares them with the stored ones and reads only the examples it has left to run.
        ``None`` for a subclass that reads its examples its own way."""
        cls = type(self)
        if cls.__iter__ is not Dataset.__iter__ or cls.__getitem__ is not Dataset.__getitem__:
            return None
        packed = getattr(self, "_packed", None)
        return packed.ids if isinstance(packed, PackedExamples) else None

    def _content_digest(self) -> str | None:
        """A digest of every example (id, env and payload, in order), known without naming any
        example: a resumed run whose dataset has the digest it started with trusts the example ids
        it stored and reads only the examples it has left to run. ``None`` when unknown (a subclass
        that reads its examples its own way, a payload JSON cannot hold)."""
        cls = type(self)
        if cls.__iter__ is not Dataset.__iter__ or cls.__getitem__ is not Dataset.__getitem__:
            return None
        packed = getattr(self, "_packed", None)
        return packed.content_digest() if isinstance(packed, PackedExamples) else None


class PackedExamples(Sequence[Example[Any]]):
    """Examples held compactly: each payload as its JSON when JSON reads it back exactly.

    A dict of a few strings costs ~4x its JSON as Python objects (a 250k-example
    dataset: 186 MB as objects, 69 MB packed); each read builds an equal, fresh
    payload (~1 us). Any other payload is kept as the object it is.

    A payload row of plain JSON without floats is named (its content id) only when its id is
    first asked for: a resumed run that trusts its stored ids (the content digest, kept as the
    examples are added, is the one it started with) never names the examples it ran already.
    """

    __slots__ = ("_digest", "_envs", "_ids", "_payloads")

    def __init__(self, examples: Iterable[Example[Any]] = ()) -> None:
        self._ids: list[str | None] = []
        """Each example's id; ``None`` for a plain row not named yet (:meth:`id_at` names it)."""
        self._payloads: list[bytes | _Kept] = []
        self._digest: Any = hashlib.sha256()
        """Of every example as added; ``None`` once a payload JSON cannot hold was added."""
        self._envs: list[str | None] | None = None
        """Each example's env, once one has an env (a mixture's); ``None`` while none has."""
        with collector_paused():
            for example in examples:
                self.append(example)

    def append(self, example: Example[Any], *, plain: bool = False) -> None:
        """Add ``example``; ``plain``: its payload is known to be plain JSON (its id's check said so)."""
        if example.env is not None and self._envs is None:
            self._envs = [None] * len(self._ids)
        packed = _packed(example.payload, plain=plain)
        self._ids.append(example.id)
        self._payloads.append(packed)
        if self._envs is not None:
            self._envs.append(example.env)
        if packed.__class__ is bytes:
            self._extend_digest(f"\0{example.id}\0{example.env or ''}\0".encode(errors="surrogatepass"), packed)
        else:
            self._digest = None

    def add_row(self, row: dict[str, Any], *, index: int) -> None:
        """Add the payload ``row`` (item ``index`` of a dataset) under its content id. A plain
        row is kept only as its JSON, so it needs no copy to be safe from the caller's later
        changes, and is named when first asked (plain JSON without floats is its own canonical
        form: naming it cannot fail); any other is named now (a row that cannot be named fails
        here, at its index) and copied."""
        if is_plain_json(row):
            try:
                packed = bytes(memoryview(orjson.dumps(row)))
            except orjson.JSONEncodeError:  # a string that is not valid UTF-8: named now, which says why
                pass
            else:
                self._ids.append(None)
                self._payloads.append(packed)
                if self._envs is not None:
                    self._envs.append(None)
                self._extend_digest(b"\0\0\0", packed)
                return
        try:
            example_id, plain = identify(row)
        except ValueError as exc:
            raise _unidentifiable(f"example[{index}]", exc) from None
        packed = _packed(row, plain=plain)
        self._ids.append(example_id)
        self._payloads.append(packed if packed.__class__ is bytes else _Kept(dict(row)))
        if self._envs is not None:
            self._envs.append(None)
        if packed.__class__ is bytes:
            self._extend_digest(f"\0{example_id}\0\0".encode(), packed)  # type: ignore[arg-type]
        else:
            self._digest = None

    def id_at(self, index: int) -> str:
        """The id of example ``index`` (named now if it was not yet)."""
        example_id = self._ids[index]
        if example_id is None:
            example_id = self._ids[index] = plain_example_id(orjson.loads(self._payloads[index]))  # type: ignore[arg-type]
        return example_id

    def content_digest(self) -> str | None:
        """SHA-256 of every example as added (ids given, envs, payloads as JSON), in order; ``None``
        when a payload is not held as JSON."""
        digest = self._digest
        return digest if digest is None or isinstance(digest, str) else digest.hexdigest()

    def _extend_digest(self, head: bytes, packed: bytes) -> None:
        digest = self._digest
        if digest is None:
            return
        if isinstance(digest, str):  # finished (an unpickled copy): what is added now is not in it
            self._digest = None
            return
        digest.update(head)
        digest.update(packed)

    def __getstate__(self) -> tuple[Any, ...]:
        # a hash object does not pickle: a copy carries the digest so far, finished
        return self._ids, self._payloads, self._envs, self.content_digest()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._ids, self._payloads, self._envs, self._digest = state

    @property
    def ids(self) -> Sequence[str]:
        """The examples' ids, in order, each named now if it was not yet (read-only: not a copy)."""
        ids = self._ids
        if None in ids:
            payloads = self._payloads
            with collector_paused():
                for index, example_id in enumerate(ids):
                    if example_id is None:
                        ids[index] = plain_example_id(orjson.loads(payloads[index]))  # type: ignore[arg-type]
        return ids  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Example[Any]: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Example[Any], ...]: ...
    def __getitem__(self, index: int | slice) -> Example[Any] | tuple[Example[Any], ...]:
        if isinstance(index, slice):
            return tuple(self[position] for position in range(*index.indices(len(self))))
        env = None if self._envs is None else self._envs[index]
        return Example(self.id_at(index), _unpacked(self._payloads[index]), env)

    def __iter__(self) -> Iterator[Example[Any]]:
        ids = self.ids
        if self._envs is None:
            for example_id, payload in zip(ids, self._payloads, strict=True):
                yield Example(example_id, _unpacked(payload))
            return
        for example_id, payload, env in zip(ids, self._payloads, self._envs, strict=True):
            yield Example(example_id, _unpacked(payload), env)


class _Kept:
    """A payload kept as the object it is (one that JSON would not read back exactly)."""

    __slots__ = ("payload",)

    def __init__(self, payload: Any) -> None:
        self.payload = payload


def _packed(payload: Any, *, plain: bool) -> bytes | _Kept:
    if plain or is_plain_json(payload, floats=True):
        try:
            # a copy: orjson's own result keeps its whole output buffer allocated (~1 KB)
            return bytes(memoryview(orjson.dumps(payload)))
        except orjson.JSONEncodeError:  # a string that is not valid UTF-8
            pass
    return _Kept(payload)


def _unpacked(payload: bytes | _Kept) -> Any:
    return orjson.loads(payload) if type(payload) is bytes else payload.payload  # type: ignore[union-attr]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many objects without cycles are made.

    Every few hundred new objects it would scan all those made so far: a third of the
    time it takes to build a 250k-row dataset, a tenth of an export's."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


ListDataset = Dataset
"""An in-memory dataset: the name envs written for benchmax 0.3 use."""


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


def convert_row(
    row: dict[str, Any], row_to_example: Callable[[dict[str, Any]], Any] | None, *, where: str
) -> Example[Any]:
    """A dataset row through the user's ``row_to_example`` (when given) and :func:`to_example`.

    A :class:`DatasetError` it raises is re-raised naming ``where`` (file and
    line or row); any other exception carries ``where`` as a note, so the user's
    own traceback stays intact.
    """
    converted: object = row
    if row_to_example is not None:
        try:
            converted = row_to_example(row)
        except DatasetError as exc:
            raise type(exc)(f"{where}: {exc}") from exc
        except Exception as exc:
            exc.add_note(f"while loading {where}")
            raise
    return to_example(converted, where=where)


def to_example(item: object, *, where: str) -> Example[Any]:
    """What a dataset yields, as an :class:`Example`: examples pass, payload mappings get their hash id."""
    return _identified(item, where=where)[0]


def _identified(item: object, *, where: str) -> tuple[Example[Any], bool]:
    """:func:`to_example`, and whether its id found the payload plain JSON (unknown for an Example)."""
    if isinstance(item, Example):
        return item, False
    if isinstance(item, Mapping):
        payload = dict(item)
        try:
            example_id, plain = identify(payload)
        except ValueError as exc:
            raise _unidentifiable(where, exc) from None
        return Example(example_id, payload), plain
    raise DatasetRowTypeError(f"{where}: expected an Example or a payload dict, got {type(item).__name__}")


def _unidentifiable(where: str, exc: ValueError) -> DatasetError:
    return DatasetError(f"{where}: payload is not a JSON object benchmax can identify ({exc})")


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
