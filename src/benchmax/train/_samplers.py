"""The built-in samplers, and the ``--curriculum`` spec that names them or a custom one.

Built-ins (``benchmax train --curriculum SPEC``, :func:`parse_curriculum`):

* ``uniform``: shuffled epochs of the training set (fresh examples of an endless one).
* ``filter``: online difficulty filtering. An example whose group was dead (always
  solved or never solved) is set aside and re-checked ``recheck`` steps later
  (twice as long each time it is still dead, up to 8x).
* ``levels``: an env's difficulty levels (:class:`benchmax.envs.LevelledEnv`): start at
  the easiest (or ``start``), move up once the pass rate over the last ``window``
  groups reaches ``promote`` (and down under ``demote``, when given).
* ``weights``: a mixture's env shares follow each env's pass rate (most weight where
  it is nearest one half, where groups teach most), within ``min`` and ``max``.

``filter+levels`` and ``filter+weights`` set aside examples of the order the second draws.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from benchmax.envs import Example, check_level
from benchmax.train._curriculum import CurriculumError, ExamplePool, GroupScore, Sampler, _digest


class Uniform(Sampler):
    """Shuffled epochs of the training set, each example once per epoch; fresh examples
    of an endless one. A sampler that picks the env itself asks :meth:`draw_from`.

    The epochs of the whole training set are the ones a run without a curriculum draws
    (``random.Random(seed)`` shuffling each epoch in turn), so a curriculum built on this
    order draws what the plain run draws until it first decides otherwise.
    """

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        self._cursor: dict[str, int] = {}
        self._epochs: dict[str, tuple[int, list[str], random.Random]] = {}

    def draw(self, pool: ExamplePool, step: int) -> Example[Any] | str:
        if len(pool.envs) == 1 and pool.endless(pool.envs[0]):
            return self.draw_from(pool, pool.envs[0])
        return self._next("", pool.ids)

    def draw_from(self, pool: ExamplePool, env: str | None) -> Example[Any] | str:
        """The next example of one env (its own epochs, or its next generated example)."""
        if pool.endless(env):
            key = f"endless:{env or ''}"
            index = self._cursor.get(key, 0)
            self._cursor[key] = index + 1
            return pool.generated(env, index)
        return self._next(f"env:{env or ''}", pool.ids_of(env))

    def _next(self, key: str, ids: Sequence[str]) -> str:
        if not ids:
            raise CurriculumError("the training set holds no examples to draw")
        position = self._cursor.get(key, 0)
        self._cursor[key] = position + 1
        epoch, offset = divmod(position, len(ids))
        return self._epoch(key, ids, epoch)[offset]

    def _epoch(self, key: str, ids: Sequence[str], epoch: int) -> list[str]:
        """Epoch ``epoch`` of ``key``'s order: its generator's ``epoch + 1``-th shuffle (replayed
        from the start after a resume; an epoch is shuffled once)."""
        cached = self._epochs.get(key)
        if cached is None or cached[0] > epoch:
            rng = random.Random(self.seed if key == "" else _digest(f"{self.seed}:{key}"))
            cached = (-1, [], rng)
        number, order, rng = cached
        while number < epoch:
            order = list(ids)
            rng.shuffle(order)
            number += 1
        self._epochs[key] = (number, order, rng)
        return order

    def state(self) -> dict[str, Any]:
        return {"cursor": dict(self._cursor)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._cursor = {str(key): int(value) for key, value in dict(state.get("cursor") or {}).items()}

    def describe(self) -> str:
        return "uniform"


class DifficultyFilter(Sampler):
    """Sets aside examples whose group was dead and re-checks them later.

    A dead group is one whose siblings all scored the same: always solved (mean at or
    above ``pass_threshold``) or never solved. Such an example is skipped by the draw
    for ``recheck`` steps, then drawn again; still dead, it waits twice as long (up to
    8x). When every example is set aside, the one due first is re-checked early.
    """

    def __init__(self, base: Sampler | None = None, *, recheck: int = 8, pass_threshold: float = 1.0) -> None:
        if recheck < 1:
            raise CurriculumError(f"filter: recheck must be >= 1 step, got {recheck}")
        self.base = base or Uniform()
        self.recheck = recheck
        self.pass_threshold = pass_threshold
        self._aside: dict[str, list[Any]] = {}
        """example id -> [due step, times set aside, solved, env]"""
        self._skipped = 0

    @property
    def uses_levels(self) -> bool:  # type: ignore[override]
        return self.base.uses_levels

    def start(self, pool: ExamplePool) -> None:
        self.base.start(pool)

    def draw(self, pool: ExamplePool, step: int) -> Example[Any] | str:
        for example_id in [key for key, (due, *_) in self._aside.items() if due <= step]:
            self._aside[example_id][0] = -1  # due: drawn as usual again, set aside again if still dead
        tries = max(len(pool.ids), 1) + len(self._aside) + 1
        candidate: Example[Any] | str | None = None
        for _ in range(tries):
            candidate = self.base.draw(pool, step)
            held = self._aside.get(candidate if isinstance(candidate, str) else candidate.id)
            if held is None or held[0] < 0:
                return candidate
            self._skipped += 1
        # everything drawable is set aside: re-check the one due first, early
        waiting = [key for key, held in self._aside.items() if held[0] >= 0]
        if waiting:
            first = min(waiting, key=lambda key: self._aside[key][0])
            if pool.get(first) is not None:
                self._aside[first][0] = -1
                return first
        assert candidate is not None
        return candidate

    def update(self, group: GroupScore) -> None:
        self.base.update(group)
        example_id = group.example.id
        if not group.dead:
            self._aside.pop(example_id, None)
            return
        times = int(self._aside[example_id][1]) + 1 if example_id in self._aside else 1
        wait = self.recheck * min(2 ** (times - 1), 8)
        solved = group.mean >= self.pass_threshold
        self._aside[example_id] = [group.step + wait, times, solved, group.env]

    def state(self) -> dict[str, Any]:
        return {"aside": {key: list(value) for key, value in self._aside.items()}, "base": self.base.state()}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._aside = {str(key): list(value) for key, value in dict(state.get("aside") or {}).items()}
        self.base.load_state(state.get("base") or {})

    def figures(self) -> dict[str, float]:
        held = [value for value in self._aside.values() if value[0] >= 0]
        figures = {
            **self.base.figures(),
            "curriculum/set_aside": float(len(held)),
            "curriculum/set_aside_solved": float(sum(bool(value[2]) for value in held)),
            "curriculum/set_aside_unsolved": float(sum(not value[2] for value in held)),
            "curriculum/skipped": float(self._skipped),
        }
        envs = {value[3] for value in self._aside.values() if value[3] is not None}
        for env in sorted(envs):
            figures[f"curriculum/{env}/set_aside"] = float(sum(value[3] == env for value in held))
        self._skipped = 0
        return figures

    def describe(self) -> str:
        inner = "" if isinstance(self.base, Uniform) else f"+{self.base.describe()}"
        return f"filter(recheck={self.recheck},pass={self.pass_threshold:g}){inner}"


class Levels(Sampler):
    """Difficulty levels of each env that has them: start easy, move up as the policy passes.

    The level's pass rate is the mean pass rate of its last ``window`` groups (a rollout
    passes when its score reaches ``pass_threshold``); at ``promote`` or above the env
    moves up a level, under ``demote`` (when given) down one. Envs of a mixture without
    levels draw their own examples as ``uniform`` does.
    """

    uses_levels: ClassVar[bool] = True

    def __init__(
        self,
        *,
        promote: float = 0.8,
        demote: float | None = None,
        window: int = 8,
        start: str | None = None,
        pass_threshold: float = 1.0,
        seed: int = 0,
    ) -> None:
        if not 0 < promote <= 1:
            raise CurriculumError(f"levels: promote must be in (0, 1], got {promote}")
        if demote is not None and not 0 <= demote < promote:
            raise CurriculumError(f"levels: demote must be in [0, promote), got {demote}")
        if window < 1:
            raise CurriculumError(f"levels: window must be >= 1 group, got {window}")
        self.promote, self.demote, self.window = promote, demote, window
        self.start_level = start
        self.pass_threshold = pass_threshold
        self._order = Uniform(seed=seed)
        self._level: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._cursor: dict[str, int] = {}
        self._recent: dict[str, list[float]] = {}
        self._drawn: dict[str, tuple[str | None, int]] = {}

    def start(self, pool: ExamplePool) -> None:
        levelled = [env for env in pool.envs if pool.levels(env)]
        if not levelled:
            raise CurriculumError(
                "levels: no env of this run exposes difficulty levels (an env implements "
                "difficulty_levels() and create_level_dataset(); see docs/training.md, 'Curricula')"
            )
        for env in levelled:
            key = env or ""
            self._counts[key] = len(pool.levels(env))
            if key not in self._level:
                first = 0
                if self.start_level is not None:
                    first = pool.levels(env).index(check_level(env or "the env", self.start_level, pool.levels(env)))
                self._level[key] = first

    def draw(self, pool: ExamplePool, step: int) -> Example[Any] | str:
        if len(pool.envs) == 1:
            env = pool.envs[0]
        else:
            picked = self._order.draw(pool, step)
            example = pool.get(picked) if isinstance(picked, str) else picked
            env = example.env if example is not None else None
            if not pool.levels(env):
                return picked
        return self.draw_from(pool, env)

    def draw_from(self, pool: ExamplePool, env: str | None) -> Example[Any] | str:
        if not pool.levels(env):
            return self._order.draw_from(pool, env)
        key = env or ""
        level_index = self._level.get(key, 0)
        level = pool.levels(env)[level_index]
        cursor = f"{key}:{level}"
        index = self._cursor.get(cursor, 0)
        self._cursor[cursor] = index + 1
        example = pool.at_level(env, level, index)
        self._drawn[example.id] = (env, level_index)
        return example

    def update(self, group: GroupScore) -> None:
        drawn = self._drawn.pop(group.example.id, None)
        if drawn is None:
            return
        env, level_index = drawn
        key = env or ""
        if self._level.get(key, 0) != level_index:
            return  # drawn before the level changed
        recent = self._recent.setdefault(key, [])
        recent.append(group.pass_rate(self.pass_threshold))
        del recent[: -self.window]
        if len(recent) < self.window:
            return
        rate = sum(recent) / len(recent)
        if rate >= self.promote:
            self._level[key] = min(level_index + 1, self._counts.get(key, 1) - 1)
        elif self.demote is not None and rate < self.demote and level_index > 0:
            self._level[key] = level_index - 1
        if self._level[key] != level_index:
            recent.clear()

    def state(self) -> dict[str, Any]:
        return {
            "level": dict(self._level),
            "cursor": dict(self._cursor),
            "recent": {key: list(values) for key, values in self._recent.items()},
            "order": self._order.state(),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._level = {str(key): int(value) for key, value in dict(state.get("level") or {}).items()}
        self._cursor = {str(key): int(value) for key, value in dict(state.get("cursor") or {}).items()}
        self._recent = {str(key): [float(v) for v in values] for key, values in dict(state.get("recent") or {}).items()}
        self._order.load_state(state.get("order") or {})

    def figures(self) -> dict[str, float]:
        figures: dict[str, float] = {}
        for key, level in sorted(self._level.items()):
            if key:
                figures[f"curriculum/{key}/level"] = float(level)
            else:
                figures["curriculum/level"] = float(level)
            recent = self._recent.get(key) or []
            if recent and not key:
                figures["curriculum/level_pass_rate"] = sum(recent) / len(recent)
        if len(self._level) > 1 or (self._level and "" not in self._level):
            figures["curriculum/level"] = sum(self._level.values()) / len(self._level)
        return figures

    def describe(self) -> str:
        options = [f"promote={self.promote:g}", f"window={self.window}", f"pass={self.pass_threshold:g}"]
        if self.demote is not None:
            options.append(f"demote={self.demote:g}")
        if self.start_level is not None:
            options.append(f"start={self.start_level}")
        return f"levels({','.join(options)})"


class PassRateWeights(Sampler):
    """A mixture's env shares follow each env's pass rate, within ``[min, max]``.

    An env's recent pass rate ``p`` (an exponential average over its groups, rate
    ``ema``) gives it the weight ``p (1 - p)``: most where half its rollouts pass,
    where GRPO groups teach most; little where it is solved or hopeless. The shares
    are then held within ``[min, max]`` (renormalised). Until an env has been scored
    its weight is the mixture's.
    """

    def __init__(
        self, *, low: float = 0.05, high: float = 0.8, ema: float = 0.2, pass_threshold: float = 1.0, seed: int = 0
    ) -> None:
        if not 0 <= low < high <= 1:
            raise CurriculumError(f"weights: need 0 <= min < max <= 1, got min={low} max={high}")
        if not 0 < ema <= 1:
            raise CurriculumError(f"weights: ema must be in (0, 1], got {ema}")
        self.low, self.high, self.ema = low, high, ema
        self.pass_threshold = pass_threshold
        self.seed = seed
        self._order = Uniform(seed=seed)
        self._rate: dict[str, float] = {}
        self._draws = 0
        self._envs: tuple[str, ...] = ()
        self._given: dict[str, float] = {}

    def start(self, pool: ExamplePool) -> None:
        envs = tuple(env for env in pool.envs if env is not None)
        if len(envs) < 2:
            raise CurriculumError(
                "weights: follows the envs of a mixture; this run trains one env (--env A=W --env B=W)"
            )
        if self.low * len(envs) > 1 or self.high * len(envs) < 1:
            raise CurriculumError(
                f"weights: min={self.low:g} and max={self.high:g} cannot hold for {len(envs)} envs "
                f"(need min x envs <= 1 <= max x envs)"
            )
        self._envs = envs
        total = sum(pool.weights.get(env, 1.0) for env in envs) or 1.0
        self._given = {env: pool.weights.get(env, 1.0) / total for env in envs}

    def shares(self) -> dict[str, float]:
        raw = {
            env: (self._rate[env] * (1 - self._rate[env]) + 1e-3) if env in self._rate else None for env in self._envs
        }
        known = [value for value in raw.values() if value is not None]
        scale = sum(known) / len(known) if known else 1.0
        weights = {
            env: value if value is not None else self._given[env] * scale * len(self._envs)
            for env, value in raw.items()
        }
        return _bounded(weights, self.low, self.high)

    def draw(self, pool: ExamplePool, step: int) -> Example[Any] | str:
        shares = self.shares()
        point = random.Random(_digest(f"{self.seed}:weights:{self._draws}")).random()
        self._draws += 1
        env = self._envs[-1]
        for name in self._envs:
            point -= shares[name]
            if point < 0:
                env = name
                break
        return self._order.draw_from(pool, env)

    def update(self, group: GroupScore) -> None:
        if group.env is None:
            return
        rate = group.pass_rate(self.pass_threshold)
        previous = self._rate.get(group.env)
        self._rate[group.env] = rate if previous is None else (1 - self.ema) * previous + self.ema * rate

    def state(self) -> dict[str, Any]:
        return {"rate": dict(self._rate), "draws": self._draws, "order": self._order.state()}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._rate = {str(key): float(value) for key, value in dict(state.get("rate") or {}).items()}
        self._draws = int(state.get("draws") or 0)
        self._order.load_state(state.get("order") or {})

    def figures(self) -> dict[str, float]:
        figures: dict[str, float] = {}
        for env, share in self.shares().items():
            figures[f"curriculum/{env}/weight"] = share
            if env in self._rate:
                figures[f"curriculum/{env}/pass_rate"] = self._rate[env]
        return figures

    def describe(self) -> str:
        return f"weights(min={self.low:g},max={self.high:g},ema={self.ema:g},pass={self.pass_threshold:g})"


def _bounded(weights: Mapping[str, float], low: float, high: float) -> dict[str, float]:
    """``weights`` as shares summing to 1, each within ``[low, high]``: ``clip(scale x weight)``
    with the one scale that makes them sum to 1 (found by bisection; the sum grows with it)."""
    positive = {env: max(value, 1e-12) for env, value in weights.items()}

    def shares(scale: float) -> dict[str, float]:
        return {env: min(high, max(low, scale * value)) for env, value in positive.items()}

    below, above = 0.0, 1.0
    while sum(shares(above).values()) < 1.0 and above < 1e18:
        above *= 2
    for _ in range(200):
        middle = (below + above) / 2
        if sum(shares(middle).values()) < 1.0:
            below = middle
        else:
            above = middle
    found = shares(above)
    total = sum(found.values())
    return {env: value / total for env, value in found.items()}


# -- the spec ----------------------------------------------------------------------

_PART = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?:\((.*)\))?\s*$")
_OPTIONS: dict[str, dict[str, str]] = {
    "uniform": {},
    "filter": {"recheck": "recheck", "pass": "pass_threshold"},
    "levels": {
        "promote": "promote",
        "demote": "demote",
        "window": "window",
        "start": "start",
        "pass": "pass_threshold",
    },
    "weights": {"min": "low", "max": "high", "ema": "ema", "pass": "pass_threshold"},
}


def parse_curriculum(spec: str, *, seed: int = 0) -> Sampler:
    """The sampler a ``--curriculum`` spec names.

    ``uniform``, ``filter``, ``levels``, ``weights``, each with options in parentheses
    (``levels(promote=0.7,window=4,start=2)``, ``weights(min=0.1,max=0.6)``); ``filter+B``
    filters what ``B`` draws; ``path/to/file.py:Class`` or ``module:Class`` is a sampler of
    your own, constructed without arguments.
    """
    text = spec.strip()
    if not text:
        raise CurriculumError(
            "--curriculum is empty; give uniform, filter, levels, weights, filter+levels, or FILE.py:Class"
        )
    if ":" in text and "(" not in text.split(":", 1)[0]:
        return _custom(text)
    parts = [part for part in text.split("+")]
    samplers = [_part(part, seed=seed) for part in parts]
    if len(samplers) == 1:
        return samplers[0]
    if (
        len(samplers) == 2
        and isinstance(samplers[0], DifficultyFilter)
        and not isinstance(samplers[1], DifficultyFilter)
    ):
        first = samplers[0]
        return DifficultyFilter(samplers[1], recheck=first.recheck, pass_threshold=first.pass_threshold)
    raise CurriculumError(f"--curriculum {spec!r}: combine as filter+levels or filter+weights (the filter first)")


def _part(text: str, *, seed: int) -> Sampler:
    match = _PART.match(text)
    name = match.group(1) if match else text.strip()
    if match is None or name not in _OPTIONS:
        raise CurriculumError(
            f"--curriculum: unknown part {text.strip()!r}; use uniform, filter, levels or weights "
            "(options in parentheses: levels(promote=0.7)), or FILE.py:Class for your own"
        )
    options: dict[str, Any] = {}
    for item in filter(None, (piece.strip() for piece in (match.group(2) or "").split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in _OPTIONS[name]:
            known = ", ".join(_OPTIONS[name]) or "none"
            raise CurriculumError(f"--curriculum {name}: unknown option {item!r}; its options: {known}")
        options[_OPTIONS[name][key]] = _value(name, key, value.strip())
    try:
        if name == "uniform":
            return Uniform(seed=seed)
        if name == "filter":
            return DifficultyFilter(Uniform(seed=seed), **options)
        if name == "levels":
            return Levels(seed=seed, **options)
        return PassRateWeights(seed=seed, **options)
    except TypeError as exc:
        raise CurriculumError(f"--curriculum {name}: {exc}") from None


def _value(name: str, key: str, value: str) -> Any:
    if key == "start":
        return value
    try:
        return int(value) if key in ("recheck", "window") else float(value)
    except ValueError:
        kind = "an integer" if key in ("recheck", "window") else "a number"
        raise CurriculumError(f"--curriculum {name}: {key} must be {kind}, got {value!r}") from None


def _custom(spec: str) -> Sampler:
    target, _, attribute = spec.rpartition(":")
    try:
        if target.endswith(".py"):
            path = Path(target).resolve()
            if not path.is_file():
                raise CurriculumError(f"--curriculum {spec!r}: no file {path}")
            module_name = f"benchmax_curriculum_{_digest(str(path)):x}"
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
        cls = getattr(module, attribute)
    except CurriculumError:
        raise
    except Exception as exc:
        raise CurriculumError(f"--curriculum {spec!r}: cannot load it ({type(exc).__name__}: {exc})") from None
    sampler = cls()
    if not isinstance(sampler, Sampler):
        raise CurriculumError(f"--curriculum {spec!r}: {attribute} is not a benchmax.train.Sampler subclass")
    sampler.describe = lambda: spec  # type: ignore[method-assign]
    return sampler
