"""Hugging Face ``datasets`` as a benchmax dataset: local files, a ``save_to_disk`` directory, or the Hub.

``HFDataset`` streams: each pass over it reads rows from the source as they are
used (``datasets``' streaming readers for files, the memory-mapped Arrow table of
a ``save_to_disk`` directory), so ``max_examples`` reads only what it needs and a
big dataset never sits in Python memory. Each row goes through ``row_to_example``
as in :class:`~benchmax.envs.JsonlDataset`; ids are the contract's content hash
of the payload, and errors name the file and the row.

``datasets`` (the ``hf`` extra) is imported on the first read, not before.
"""

from __future__ import annotations

import bisect
import glob
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any, TypeVar

from benchmax.envs import DatasetError, DatasetNotFound, Example, collecting_dataset_problems
from benchmax.envs.dataset import Dataset, PackedExamples, convert_row, resolve_under, validate_max_examples

__all__ = ["HFDataset"]

Payload = TypeVar("Payload")
HFRow = dict[str, Any]
RowToExample = Callable[[HFRow], "Example[Any] | Mapping[str, Any]"]

FORMATS = {
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
}
"""File suffixes ``HFDataset`` reads, and the ``datasets`` builder that reads each."""
_COMPRESSED = {".gz", ".bz2", ".xz", ".zst", ".zstd", ".lz4"}
_BATCH_ROWS = 1000
"""Rows read per batch; a capped pass asks for no more than it still needs."""
_GLOB = re.compile(r"[*?\[]")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


class _Part:
    """One source read in order: a file, a ``save_to_disk`` directory, or a Hub split."""

    def __init__(self, label: str, files: tuple[Path, ...], opener: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self.label = label
        self.files = files
        self._opener = opener
        self._opened: Iterable[Mapping[str, Any]] | None = None

    def rows(self, batch_size: int) -> Iterator[dict[str, Any]]:
        """The part's rows; opened once, read again on each pass, in column batches (``datasets``
        formats a row at a time an order of magnitude slower than a batch)."""
        if self._opened is None:
            self._opened = self._opener()
        batches = getattr(self._opened, "iter", None)
        if batches is None:
            yield from (dict(row) for row in self._opened)
            return
        for batch in batches(batch_size=batch_size):
            names = list(batch)
            for values in zip(*batch.values(), strict=True):
                yield dict(zip(names, values, strict=True))


class HFDataset(Dataset[Payload]):
    """Examples read through Hugging Face ``datasets``.

    ``source`` is a local data file (JSON/JSONL, CSV/TSV, Parquet, Arrow;
    compressed ones too), a glob or a list of them (read in order), a directory
    of such files, or a directory written by ``datasets``' ``save_to_disk``
    (``split`` picks one split of a saved ``DatasetDict``). With ``base_dir`` the
    paths must resolve inside it. :meth:`from_hf` also takes a Hub dataset name.

    Each pass streams from the source; ``len()`` and indexing read the whole
    (capped) dataset once and keep it. ``load_options`` go to
    ``datasets.load_dataset`` (``sep=";"``, ``features=...``). Arrow gives every row
    every column: a key a row lacks reads as ``None``, so ids match
    ``JsonlDataset``'s for rows that share their keys.
    """

    def __init__(
        self,
        source: str | Path | Sequence[str | Path],
        row_to_example: RowToExample | EllipsisType | None = None,
        max_examples: int | None = None,
        *,
        base_dir: str | Path | None = None,
        split: str | None = None,
        format: str | None = None,
        **load_options: Any,
    ) -> None:
        parts = _local_parts(source, base_dir, split, format, load_options)
        self._setup(parts, row_to_example, max_examples, origin={"files": [str(p) for p in _files(parts)]})

    @classmethod
    def from_hf(
        cls,
        name: str | Path,
        row_to_example: RowToExample | EllipsisType | None = None,
        max_examples: int | None = None,
        *,
        split: str = "train",
        config: str | None = None,
        revision: str | None = None,
        base_dir: str | Path | None = None,
        **load_options: Any,
    ) -> HFDataset[Any]:
        """A Hub dataset by name (``"openai/gsm8k"``, with ``config="main"``), or a local path as the constructor.

        A name that is a path that exists (under ``base_dir`` when given) reads
        that; anything else is fetched from the Hub by ``datasets`` (streamed,
        never downloaded whole), which needs the network, or its cache offline.
        """
        local = Path(base_dir or ".") / name
        if local.exists() or _GLOB.search(str(name)):
            return cls(name, row_to_example, max_examples, base_dir=base_dir, split=split if local.is_dir() else None,
                       **load_options)  # fmt: skip
        text = str(name)
        if _suffix(Path(text)) in FORMATS or not _HUB_ID.match(text):
            raise DatasetNotFound(f"{local}: dataset file not found (and {text!r} is not a Hub dataset name)")
        label = f"{text}{f'/{config}' if config else ''}[{split}]"

        def opener() -> Iterable[Mapping[str, Any]]:
            datasets = _datasets()
            try:
                return datasets.load_dataset(
                    text, config, split=split, revision=revision, streaming=True, **load_options
                )
            except Exception as exc:
                raise DatasetError(
                    f"{label}: datasets could not open the Hub dataset ({type(exc).__name__}: {exc}); check the "
                    "name, config and split, and that this machine reaches the Hub (or has it cached)"
                ) from exc

        dataset: HFDataset[Any] = cls.__new__(cls)
        origin = {"hub": text, "config": config, "split": split, "revision": revision}
        dataset._setup([_Part(label, (), opener)], row_to_example, max_examples, origin=origin)
        return dataset

    def _setup(
        self,
        parts: list[_Part],
        row_to_example: RowToExample | EllipsisType | None,
        max_examples: int | None,
        *,
        origin: dict[str, Any],
    ) -> None:
        self._max_examples = validate_max_examples(max_examples)
        self._row_to_example = None if row_to_example is Ellipsis else row_to_example
        self._parts = parts
        # validate reads a dataset inside collect_dataset_problems(); the passes come later.
        self._problems = collecting_dataset_problems()
        self._starts: list[int] = []
        self._segments: list[tuple[str, int]] = []
        self._examples_read: PackedExamples | None = None
        self.origin = origin
        """Where the rows come from (``files`` or ``hub``): what a run's provenance records."""
        self.rows_read = 0
        """Rows the latest pass pulled from the source (a capped pass stops at ``max_examples``)."""

    def source_files(self) -> tuple[Path, ...]:
        """The local files the rows are read from (none for a Hub dataset)."""
        return _files(self._parts)

    def location_of(self, index: int) -> str:
        """``file row N`` of example ``index`` as the latest pass read it."""
        position = bisect.bisect_right(self._starts, index) - 1
        if position < 0:
            return f"{type(self).__name__}[{index}]"
        label, row = self._segments[position]
        return f"{label} row {row + index - self._starts[position]}"

    def __iter__(self) -> Iterator[Example[Payload]]:
        # A generator, so this is decided at the first step, not when the iterator is made:
        # list() asks len() (which reads the dataset once and keeps it) in between.
        if self._examples_read is None:
            yield from self._stream()
        else:
            yield from self._examples_read

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, index: int) -> Example[Payload]:
        return self._all()[index]

    def _known_ids(self) -> Sequence[str] | None:
        """The ids, once a pass has kept the examples (a streamed dataset's are not known ahead)."""
        return None if self._examples_read is None else self._examples_read.ids

    def _all(self) -> PackedExamples:
        if self._examples_read is None:
            self._examples_read = PackedExamples(self._stream())
        return self._examples_read

    def _stream(self) -> Iterator[Example[Any]]:
        problems = collecting_dataset_problems()
        if problems is None:
            problems = self._problems
        self._starts, self._segments, self.rows_read = [], [], 0
        count = 0
        for part in self._parts:
            if self._max_examples is not None and count >= self._max_examples:
                return
            self._mark(count, part.label, 1)
            left = None if self._max_examples is None else self._max_examples - count
            rows = part.rows(min(_BATCH_ROWS, left) if left is not None else _BATCH_ROWS)
            row_number = 0
            try:
                while self._max_examples is None or count < self._max_examples:
                    try:
                        row = next(rows)
                    except StopIteration:
                        break
                    except DatasetError as exc:  # the part could not be opened
                        if problems is None:
                            raise
                        problems.append(exc)
                        break
                    except Exception as exc:
                        error = DatasetError(
                            f"{part.label}: cannot read past row {row_number} ({type(exc).__name__}: {exc})"
                        )
                        if problems is None:
                            raise error from exc
                        problems.append(error)
                        break
                    row_number += 1
                    self.rows_read += 1
                    where = f"{part.label} row {row_number}"
                    try:
                        example = self._example(row, where)
                    except DatasetError as exc:
                        if problems is None:
                            raise
                        problems.append(exc)
                        self._mark(count, part.label, row_number + 1)
                        continue
                    except Exception as exc:
                        if problems is None:
                            raise
                        problems.append(DatasetError(f"{where}: row_to_example raised {type(exc).__name__}: {exc}"))
                        self._mark(count, part.label, row_number + 1)
                        continue
                    yield example
                    count += 1
            finally:
                rows.close()

    def _mark(self, index: int, label: str, row: int) -> None:
        """From example ``index`` on, examples come from ``label`` starting at ``row``."""
        if self._starts and self._starts[-1] == index:
            self._segments[-1] = (label, row)
            return
        self._starts.append(index)
        self._segments.append((label, row))

    def _example(self, row: Mapping[str, Any], where: str) -> Example[Any]:
        return convert_row(dict(row), self._row_to_example, where=where)

    def __repr__(self) -> str:
        labels = ", ".join(part.label for part in self._parts[:3]) + (", ..." if len(self._parts) > 3 else "")
        return f"{type(self).__name__}({labels})"


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            "HFDataset reads through Hugging Face datasets, which is not installed: pip install 'benchmax[hf]'"
        ) from None
    return datasets


def _files(parts: Sequence[_Part]) -> tuple[Path, ...]:
    return tuple(file for part in parts for file in part.files)


def _suffix(path: Path) -> str:
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _local_parts(
    source: str | Path | Sequence[str | Path],
    base_dir: str | Path | None,
    split: str | None,
    format: str | None,
    options: Mapping[str, Any],
) -> list[_Part]:
    items = [source] if isinstance(source, str | Path) else list(source)
    if not items:
        raise DatasetError("HFDataset needs at least one source (a file, glob or directory)")
    parts: list[_Part] = []
    for item in items:
        for path in _expand(item, base_dir):
            if path.is_dir():
                parts.extend(_directory_parts(path, split, format, options))
            else:
                parts.append(_file_part(path, format, options))
    return parts


def _expand(item: str | Path, base_dir: str | Path | None) -> list[Path]:
    text = str(Path(item).expanduser())
    if _GLOB.search(text):
        pattern = str(Path(base_dir) / text) if base_dir is not None else text
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise DatasetNotFound(f"{pattern}: no dataset file matches")
        return [resolve_under(base_dir, match) if base_dir is not None else Path(match) for match in matches]
    path = resolve_under(base_dir, text) if base_dir is not None else Path(text)
    if not path.exists():
        raise DatasetNotFound(f"{path}: dataset file not found")
    return [path]


def _directory_parts(path: Path, split: str | None, format: str | None, options: Mapping[str, Any]) -> list[_Part]:
    if (path / "dataset_dict.json").is_file():
        splits = _saved_splits(path)
        chosen = split or (splits[0] if len(splits) == 1 else None)
        if chosen is None or chosen not in splits:
            asked = f"split {split!r} is not one of them" if split else "pass split=NAME"
            raise DatasetError(f"{path}: a saved DatasetDict with splits {', '.join(splits)}; {asked}")
        return [_saved_part(path / chosen, path, chosen)]
    if (path / "state.json").is_file():
        return [_saved_part(path, path, None)]
    files = sorted(p for p in path.iterdir() if p.is_file() and _suffix(p) in FORMATS and not p.name.startswith("."))
    if not files:
        raise DatasetNotFound(
            f"{path}: no data files ({', '.join(sorted(FORMATS))}) and not a save_to_disk directory"
        )
    return [_file_part(file, format, options) for file in files]


def _saved_splits(path: Path) -> list[str]:
    try:
        splits = json.loads((path / "dataset_dict.json").read_text())["splits"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path / 'dataset_dict.json'}: unreadable ({exc}); save the dataset again") from None
    return [str(name) for name in splits]


def _saved_part(directory: Path, root: Path, split: str | None) -> _Part:
    """A ``save_to_disk`` directory: its Arrow table is memory-mapped, rows are read as they are used."""
    files = tuple(sorted(p for p in directory.iterdir() if p.is_file()))
    if root != directory:
        files = (root / "dataset_dict.json", *files)

    def opener() -> Iterable[Mapping[str, Any]]:
        datasets = _datasets()
        try:
            loaded = datasets.load_from_disk(str(root))
        except Exception as exc:
            raise DatasetError(f"{root}: datasets could not load it ({type(exc).__name__}: {exc})") from exc
        return loaded[split] if split is not None else loaded

    return _Part(str(directory), files, opener)


def _file_part(path: Path, format: str | None, options: Mapping[str, Any]) -> _Part:
    builder = format or FORMATS.get(_suffix(path))
    if builder is None:
        raise DatasetError(
            f"{path}: cannot tell its format from the name; pass format= one of json, csv, parquet, arrow"
        )
    load_options = dict(options)
    if _suffix(path) == ".tsv" and "sep" not in load_options and "delimiter" not in load_options:
        load_options["sep"] = "\t"

    def opener() -> Iterable[Mapping[str, Any]]:
        datasets = _datasets()
        try:
            return datasets.load_dataset(
                builder, data_files=[str(path)], split="train", streaming=True, **load_options
            )
        except Exception as exc:
            raise DatasetError(
                f"{path}: datasets could not read it as {builder} ({type(exc).__name__}: {exc})"
            ) from exc

    return _Part(str(path), (path,), opener)
