"""``SftDataset``: supervised-finetuning rows that are valid as a whole, or not a dataset at all."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from benchmax.sft._issues import SftDatasetError, SftIssue
from benchmax.sft._rows import MAX_ROW_BYTES, validate_row
from benchmax.sft._strict_json import StrictJsonError, canonical_json_bytes, check_json_tree, parse_strict_json

SFT_DATASET_FORMAT = "benchmax-sft-v1"
"""The format name of this row contract, for whatever stores or ships the dataset."""

_BLANK = b" \t\r\f\v"
_BOM = b"\xef\xbb\xbf"
_PRIVATE = object()


class _Issues:
    """Issues of one load, with the line and row of whatever is being checked."""

    def __init__(self) -> None:
        self.found: list[SftIssue] = []
        self.line: int | None = None
        self.row: int | None = None
        self.in_row = 0

    def at(self, line: int | None, row: int | None) -> _Issues:
        self.line, self.row, self.in_row = line, row, 0
        return self

    def __call__(self, location: str, message: str) -> None:
        self.in_row += 1
        self.found.append(SftIssue(message=message, location=location, line=self.line, row=self.row))

    def raise_any(self) -> None:
        if self.found:
            raise SftDatasetError(self.found)


def _encode(row: object, issues: _Issues) -> bytes | None:
    """The row's canonical bytes if it passes every check, else ``None`` (its issues recorded)."""
    check_json_tree(row, "$", issues)
    if type(row) is not dict:
        issues("$", "row must be a JSON object")
        return None
    validate_row(row, issues)
    if issues.in_row:
        return None
    encoded = canonical_json_bytes(row)
    if len(encoded) > MAX_ROW_BYTES:
        issues("$", f"row canonical size is {len(encoded)} bytes; the maximum is {MAX_ROW_BYTES}")
        return None
    return encoded


class SftDataset:
    """An immutable, fully validated ``benchmax-sft-v1`` dataset, rows in input order.

    Build one with :meth:`from_jsonl` or :meth:`from_rows`; either raises
    :class:`SftDatasetError` listing every issue, so a half-valid dataset never
    exists. One row is ``{"messages": [...], "tools"?: [...], "metadata"?: {...}}``:

    - ``system``/``user`` messages: exactly ``role`` and non-empty string ``content``;
    - ``assistant``: optional string-or-null ``content``, optional non-empty
      ``tool_calls``, optional integer ``weight`` 0 or 1 (default 1); each says
      something (content or a call), and some turn has weight 1;
    - ``tool``: exactly ``role``, string ``content`` and ``tool_call_id``; each
      call gets one result, in call order, before the next non-tool message;
    - function tools and calls are checked deeply, and calls must name a
      defined function; ``metadata`` is any finite JSON object except keys
      starting ``_castform_`` and ``tools`` (the runtime's).

    Images and other content parts, fractional weights, prompt/completion rows,
    duplicate JSON keys, lone surrogates, non-finite numbers and nesting past
    64 levels are refused. :meth:`to_jsonl_bytes` is canonical: equal inputs
    give equal bytes.
    """

    __slots__ = ("_encoded", "_rows")

    def __init__(self, rows: tuple[dict[str, object], ...], encoded: tuple[bytes, ...], token: object = None) -> None:
        if token is not _PRIVATE:
            raise TypeError("use SftDataset.from_jsonl(...) or SftDataset.from_rows(...)")
        self._rows = rows
        self._encoded = encoded

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str]) -> SftDataset:
        """Load ``path``; blank lines are skipped, and issues name the file's real line numbers."""
        issues = _Issues()
        rows: list[dict[str, object]] = []
        encoded: list[bytes] = []
        count = 0
        for line, raw in enumerate(Path(path).read_bytes().split(b"\n"), start=1):
            if not raw.strip(_BLANK):
                continue
            issues.at(line, count)
            count += 1
            if line == 1 and raw.startswith(_BOM):
                issues("$", "a UTF-8 BOM is not allowed")
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                issues("$", "line is not valid UTF-8")
                continue
            try:
                parsed = parse_strict_json(text)
            except StrictJsonError as exc:
                issues("$", str(exc))
                continue
            data = _encode(parsed, issues)
            if data is not None:
                rows.append(json.loads(data))
                encoded.append(data)
        if not count:
            issues.at(None, None)("$", "dataset contains no rows")
        issues.raise_any()
        return cls(tuple(rows), tuple(encoded), _PRIVATE)

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, object]]) -> SftDataset:
        """Validate rows already in memory; they must be plain JSON types (nothing is coerced)."""
        issues = _Issues()
        stored: list[dict[str, object]] = []
        encoded: list[bytes] = []
        count = 0
        for index, row in enumerate(rows):
            count += 1
            data = _encode(row, issues.at(None, index))
            if data is not None:
                stored.append(json.loads(data))  # a copy: later edits to the caller's rows cannot reach us
                encoded.append(data)
        if not count:
            issues.at(None, None)("$", "dataset contains no rows")
        issues.raise_any()
        return cls(tuple(stored), tuple(encoded), _PRIVATE)

    def to_jsonl_bytes(self) -> bytes:
        """The rows as canonical JSONL: sorted keys, no spaces, UTF-8, one newline after each."""
        return b"".join(data + b"\n" for data in self._encoded)

    @property
    def rows(self) -> tuple[dict[str, object], ...]:
        """The validated rows in input order; treat them as read-only."""
        return self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[dict[str, object]]:
        return iter(self._rows)

    def __repr__(self) -> str:
        return f"SftDataset({len(self)} rows)"
