"""What model calls cost: a user-editable price table, per model, in US dollars per million tokens.

The table is TOML so people can edit it by hand (comments, one model per
section); benchmax ships a default (``prices.toml`` beside this module) and a
user's file adds to it, entry by entry. A model the table does not price has an
*unknown* cost: figures say so instead of showing 0, because a 0 that means "we
do not know" would read as "free" and defeat a budget.
"""

from __future__ import annotations

import fnmatch
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.envs import Usage
from benchmax.errors import BenchmaxError

DEFAULT_PRICES = Path(__file__).with_name("prices.toml")
"""The price table benchmax ships (a few common models; edit a copy, give it with ``--prices``)."""

PRICES_ENV = "BENCHMAX_PRICES"
"""The environment variable naming a price file, when ``--prices`` is not given."""

_PER_TOKENS = 1_000_000
_FIELDS = ("prompt", "completion", "cached_prompt")
_TOP_LEVEL = ("as_of", "models")


class PriceTableError(BenchmaxError, ValueError):
    """A price file that cannot be read as a price table (the message names the file, model and field)."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens; ``cached_prompt`` ``None``: cached prompt tokens cost ``prompt``."""

    prompt: float
    completion: float
    cached_prompt: float | None = None

    def cost(self, usage: Usage) -> float:
        """Dollars for one reply's tokens (the cached tokens are part of the prompt tokens)."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = self.prompt if self.cached_prompt is None else self.cached_prompt
        return (
            (usage.prompt_tokens - cached) * self.prompt
            + cached * cached_price
            + usage.completion_tokens * self.completion
        ) / _PER_TOKENS

    def to_dict(self) -> dict[str, float]:
        data = {"prompt": self.prompt, "completion": self.completion}
        if self.cached_prompt is not None:
            data["cached_prompt"] = self.cached_prompt
        return data


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model name or glob pattern; :meth:`price` finds the one a model name pays."""

    models: Mapping[str, ModelPrice] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    """The files the table was read from, in order (later ones win)."""
    _found: dict[str, ModelPrice | None] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Each model's entry once looked up: every model call is priced, against every pattern."""

    @classmethod
    def load(cls, path: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> PriceTable:
        """The shipped table with the user's file over it: ``path``, else ``$BENCHMAX_PRICES``, else none."""
        environ = os.environ if environ is None else environ
        chosen = path if path is not None else (environ.get(PRICES_ENV) or None)
        files = [DEFAULT_PRICES]
        if chosen is not None:
            user = Path(chosen).expanduser()
            if not user.is_file():
                how = "--prices" if path is not None else f"${PRICES_ENV}"
                raise PriceTableError(f"{how} {chosen}: no such price file (copy {DEFAULT_PRICES} and edit it)")
            files.append(user)
        models: dict[str, ModelPrice] = {}
        for file in files:
            models.update(read_prices(file))
        return cls(models, tuple(str(file) for file in files))

    def price(self, model: str) -> ModelPrice | None:
        """The entry named ``model``, else the longest glob pattern matching it, else ``None``."""
        try:
            return self._found[model]
        except KeyError:
            pass
        found = self.models.get(model)
        if found is None:
            patterns = [name for name in self.models if _is_pattern(name) and fnmatch.fnmatchcase(model, name)]
            found = self.models[max(patterns, key=len)] if patterns else None
        if len(self._found) < 1024:
            self._found[model] = found
        return found

    def cost(self, model: str, usage: Usage) -> float | None:
        """Dollars for ``usage`` of ``model``; ``None`` when the table does not price it."""
        price = self.price(model)
        return None if price is None else price.cost(usage)

    def describe(self, models: list[str] | tuple[str, ...] | set[str]) -> dict[str, Any]:
        """What the run keeps of the table: where it came from and the price each model paid."""
        used: dict[str, Any] = {}
        for model in sorted(models):
            price = self.price(model)
            used[model] = price.to_dict() if price is not None else None
        return {"sources": list(self.sources), "models": used}


def read_prices(path: Path) -> dict[str, ModelPrice]:
    """One price file's entries, checked field by field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PriceTableError(f"{path}: not TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PriceTableError(f"{path}: cannot read the price file: {exc}") from None
    unknown = sorted(set(data) - set(_TOP_LEVEL))
    if unknown:
        raise PriceTableError(
            f'{path}: unknown top-level key {unknown[0]!r}; a price file holds as_of = "..." and [models."NAME"] tables'
        )
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PriceTableError(f'{path}: models must be tables, one per model: [models."gpt-4o"]')
    return {str(name): _entry(path, str(name), entry) for name, entry in models.items()}


def _entry(path: Path, name: str, entry: Any) -> ModelPrice:
    where = f'{path}: [models."{name}"]'
    if not isinstance(entry, dict):
        raise PriceTableError(f"{where} must be a table with prompt = ... and completion = ... (USD per 1M tokens)")
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise PriceTableError(f"{where}: unknown field {unknown[0]!r}; the fields are {', '.join(_FIELDS)}")
    values: dict[str, float] = {}
    for key in _FIELDS:
        if key not in entry:
            if key == "cached_prompt":
                continue
            raise PriceTableError(f"{where}: {key} is missing (US dollars per million tokens)")
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise PriceTableError(
                f"{where}: {key} must be a number >= 0 (US dollars per million tokens), got {value!r}"
            )
        values[key] = float(value)
    return ModelPrice(values["prompt"], values["completion"], values.get("cached_prompt"))


def _is_pattern(name: str) -> bool:
    return any(char in name for char in "*?[")
