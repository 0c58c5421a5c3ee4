"""Finding, constructing and reading an env from what a user types.

One loader for every face (eval, validate, train, rescore, the trainer
adapters, Ray workers): a spec is a file (``path/env.py[:Class]``), a module
(``package.module:Class``), a directory holding ``env.py`` (or 0.2.x's
``main.py``), the name of an installed env package (its ``benchmax.envs``
entry point), or ``http(s)://HOST:PORT``: an env served by ``benchmax serve``,
driven through a :class:`RemoteEnv` proxy, or another framework's env
(``inspect:``, ``reasoning-gym:``, ``verifiers:``, ``skyrl-gym:``: see
:mod:`benchmax.adapters`). Env code is loaded from the local
file system and installed packages only; a spec is never fetched (a served env
runs on its server).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.adapters import adapter_directory, adapter_env_class, adapter_env_name, is_adapter_spec
from benchmax.envs import (
    BaseEnv,
    DatasetError,
    DatasetNotFound,
    DatasetSplit,
    EndlessDatasetError,
    Environment,
    EnvSpecError,
    Example,
    check_prompt_messages,
    is_endless,
    to_example,
)
from benchmax.loading._packages import InstalledEnv, find_installed, installed_envs
from benchmax.remote import is_remote_spec, remote_env_class

ENV_FILES = ("env.py", "main.py")
"""What a directory spec loads, in this order (``main.py``: 0.2.x's examples)."""

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?(@[A-Za-z0-9_.+!-]+)?$")
_modules_lock = threading.Lock()
_module_names: dict[Path, str] = {}


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """What names an env, and the keyword arguments its class is constructed with.

    An installed env's name (``NAME`` or ``NAME@VERSION``) wins over a directory
    of that name that holds no env file; a directory that does hold one and an
    installed env of the same name are ambiguous unless they are the same code
    (an editable install run from its own directory): write ``./NAME`` for the
    directory, ``package.module:Class`` for the installed one.
    """

    spec: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def directory(self) -> Path | None:
        """The env's own directory: the default ``base_dir`` for its data files."""
        if self.adapter:
            return adapter_directory(self.spec)
        installed = self.installed()
        if installed is not None:
            origin = installed.source_file()
            return origin.parent.resolve() if origin is not None else None
        target = self._file()
        if target is not None:
            return target.parent.resolve()
        return None

    def installed(self) -> InstalledEnv | None:
        """The installed env package this spec names, or ``None`` (a file, directory or module)."""
        if self.adapter:
            return None
        name, version = self._name()
        if name is None:
            return None
        env = find_installed(name)
        if env is None:
            return None
        local = self._local_env_file()
        if local is not None:
            origin = env.source_file()
            if origin is None or origin.parent.resolve() != local.parent.resolve():
                raise EnvSpecError(
                    f"{self.spec!r} names both the directory {local.parent}/ (it holds {local.name}) and "
                    f"{env.label}; write ./{self.spec} for the directory or {env.value} for the installed env"
                )
        if version is not None and env.version != version:
            raise EnvSpecError(
                f"{env.label} is version {env.version}, not {version}; install that version "
                f"(pip install '{env.distribution}=={version}') or drop @{version}"
            )
        return env

    def _name(self) -> tuple[str | None, str | None]:
        """``(name, version)`` when the spec could be an installed env's name."""
        if self._has_class() or self.spec.endswith(".py") or not _NAME.match(self.spec):
            return None, None
        name, _, version = self.spec.partition("@")
        return name, version or None

    def _has_class(self) -> bool:
        head, sep, tail = self.spec.rpartition(":")
        return bool(sep) and bool(tail) and tail.isidentifier() and not (len(head) == 1 and head.isalpha())

    def _file(self) -> Path | None:
        path = Path(self.spec.rsplit(":", 1)[0] if self._has_class() else self.spec)
        if path.is_dir():
            for name in ENV_FILES:
                if (path / name).is_file():
                    return path / name
            return path / ENV_FILES[0]
        if path.suffix == ".py":
            return path
        return None

    def _local_env_file(self) -> Path | None:
        """The env file of a directory spec, when the directory holds one."""
        file = self._file()
        return file if file is not None and file.is_file() and Path(self.spec).is_dir() else None

    @property
    def remote(self) -> bool:
        """Whether the spec names an env served over HTTP (``benchmax serve``)."""
        return is_remote_spec(self.spec)

    @property
    def adapter(self) -> bool:
        """Whether the spec names another framework's env (``inspect:PATH.py@TASK``, ``reasoning-gym:TASK``, ...)."""
        return is_adapter_spec(self.spec)

    def load_class(self) -> type[Environment[Any, Any]]:
        if self.adapter:
            return adapter_env_class(self.spec)
        if self.remote:
            return remote_env_class(self.spec)
        if _URL.match(self.spec):
            raise EnvSpecError(
                f"{self.spec}: env code is loaded from local files and installed packages only, never "
                "fetched; download it, review it, and pass its local path (or serve it there with "
                "benchmax serve and pass http://HOST:PORT)"
            )
        installed = self.installed()
        if installed is not None:
            return _environment_class(installed.load(), installed.label)
        class_name = self.spec.rpartition(":")[2] if self._has_class() else None
        file = self._file()
        if file is not None:
            module = _import_file(file)
        else:
            module_name = self.spec.rpartition(":")[0] if class_name else self.spec
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise EnvSpecError(self._not_found(module_name, exc)) from exc
        if class_name is not None:
            return _environment_class(getattr(module, class_name, None), f"{module.__name__}:{class_name}")
        candidates = [
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, Environment)
            and value.__module__ == module.__name__
            and not inspect.isabstract(value)
        ]
        if len(candidates) != 1:
            names = ", ".join(sorted(c.__name__ for c in candidates)) or "none"
            raise EnvSpecError(
                f"{self.spec}: expected exactly one environment class, found {names}; name it as FILE:Class"
            )
        return candidates[0]

    def _not_found(self, module_name: str, exc: ImportError) -> str:
        forms = (
            "give path/to/file.py[:Class], a directory holding env.py, package.module:Class, "
            "or the name of an installed env"
        )
        if self._name()[0] is None:
            return f"cannot import {module_name!r} ({exc}); {forms} (benchmax list)"
        names = sorted({env.name for env in installed_envs()})
        known = f"installed envs: {', '.join(names)}" if names else "no env package is installed"
        return (
            f"{self.spec!r} is no installed env, directory or importable module ({known}); "
            f"{forms}; install an env package with pip install -e PATH"
        )

    def load(self) -> Environment[Any, Any]:
        cls = self.load_class()
        try:
            return cls(**dict(self.kwargs))
        except TypeError as exc:
            raise EnvSpecError(f"cannot construct {cls.__name__}(**{dict(self.kwargs)!r}): {exc}") from exc


def adapter_name(spec: str) -> str | None:
    """The run name of another framework's env (``inspect:evals/arith.py@addition`` -> ``addition``), else ``None``."""
    return adapter_env_name(spec) if is_adapter_spec(spec) else None


def load_env(
    spec: str | EnvSpec, kwargs: Mapping[str, Any] | None = None, *, data_dir: str | Path | None = None
) -> tuple[Environment[Any, Any], Path]:
    """Construct the env ``spec`` names and say where its data lives.

    The data directory (``base_dir`` of ``create_dataset``) is ``data_dir`` when
    given, else the env's own directory, else the working directory: the one
    rule every face uses.
    """
    env_spec = spec if isinstance(spec, EnvSpec) else EnvSpec(spec, dict(kwargs or {}))
    env = env_spec.load()
    return env, data_directory(env_spec, data_dir)


def data_directory(spec: EnvSpec, data_dir: str | Path | None = None) -> Path:
    """``data_dir``, else the env's directory, else the working directory."""
    return Path(data_dir) if data_dir is not None else (spec.directory or Path.cwd())


DATA_FOLDER = "data"
"""Where 0.2.x envs keep their files, beside the env file (their trainer passed it as ``base_dir``)."""


def data_directories(spec: EnvSpec, data_dir: str | Path | None = None) -> tuple[Path, ...]:
    """Where the env's data is looked for, in order: ``data_dir`` alone when given; else
    the env's directory (the working directory for an env without one), then its
    ``data/`` folder.

    The first is this project's convention (files beside ``env.py``); the second
    is 0.2.x's (``examples/math/main.py`` keeps ``data/train.jsonl`` and got
    ``base_dir`` from its trainer). :func:`open_dataset` takes the first where
    ``create_dataset`` finds its files.
    """
    if data_dir is not None:
        return (Path(data_dir),)
    root = data_directory(spec)
    return (root, root / DATA_FOLDER)


async def collect_examples(
    env: Environment[Any, Any], split: DatasetSplit, base_dir: Path | Sequence[Path], *, max_examples: int | None = None
) -> list[Example[Any]]:
    """The examples of ``split``, in dataset order, each checked as the env will use it.

    ``create_dataset`` gets ``max_examples`` when its signature takes it (0.2.x
    envs may not); at most that many are read either way. Repeated examples are
    kept: the runner tells them apart. A ``BaseEnv`` example must carry usable
    ``prompt_messages``; the error names its position.
    """
    return list(await open_examples(env, split, base_dir, max_examples=max_examples))


async def open_examples(
    env: Environment[Any, Any],
    split: DatasetSplit,
    base_dir: Path | Sequence[Path],
    *,
    max_examples: int | None = None,
    endless: bool = False,
) -> ExampleStream:
    """:func:`collect_examples` as a stream that can be read more than once (a run reads
    its dataset in passes instead of holding a second copy of it). ``base_dir`` may be
    the directories to look in, in order (:func:`data_directories`); the stream's
    ``base_dir`` is the one the data was found in.

    An endless dataset (:class:`benchmax.envs.EndlessDataset`) is refused without
    ``max_examples`` (nothing could read it whole) unless ``endless`` says the caller
    draws from it what it needs (training) and never iterates it to the end."""
    dataset, found_in = await locate_dataset(env, split, base_dir, max_examples=max_examples)
    if is_endless(dataset) and max_examples is None and not endless:
        raise EndlessDatasetError(
            f"{type(env).__name__}.create_dataset({split!r}) is endless (it generates examples without end): "
            "give how many to take, with --max-examples N (train's held-out eval: --eval-examples N)"
        )
    return ExampleStream(
        dataset,
        owner=f"{type(env).__name__}.create_dataset({split!r})",
        prompts=isinstance(env, BaseEnv),
        limit=max_examples,
        base_dir=found_in,
    )


class ExampleStream:
    """A dataset's examples, each checked as it is read; iterable any number of times.

    A dataset that is a one-shot iterator is read into a list once (it could not
    be read twice); any other is re-iterated, so the env's own storage is the
    only copy.
    """

    def __init__(
        self, dataset: Any, *, owner: str, prompts: bool, limit: int | None, base_dir: Path | None = None
    ) -> None:
        self.base_dir = base_dir
        """The directory ``create_dataset`` read the examples from."""
        self._source = dataset
        self._dataset = list(dataset) if iter(dataset) is dataset else dataset
        self._owner = owner
        self._prompts = prompts
        self._limit = limit

    @property
    def dataset(self) -> Any:
        """What ``create_dataset`` returned (a run's provenance hashes its files)."""
        return self._source

    def __iter__(self) -> Iterator[Example[Any]]:
        limit = self._limit
        for index, item in enumerate(self._dataset):
            if limit is not None and index >= limit:
                return
            yield self._checked(index, item)

    def known_ids(self) -> Sequence[str] | None:
        """The examples' ids in order when the dataset knows them without reading its examples
        (an in-memory :class:`Dataset`); ``None`` otherwise. Read the examples themselves with
        :meth:`example_at`."""
        hook = getattr(self._dataset, "_known_ids", None)
        ids = hook() if callable(hook) else None
        if ids is None:
            return None
        return ids[: self._limit] if self._limit is not None else ids

    def example_at(self, index: int) -> Example[Any]:
        """Example ``index``, checked as iterating checks it."""
        return self._checked(index, self._dataset[index])

    def _checked(self, index: int, item: object) -> Example[Any]:
        # A resumed run of a million rollouts reads every example again: the location that
        # names a bad one is found only for a bad one, where the check runs again to say so.
        try:
            example = item if item.__class__ is Example else to_example(item, where="")
            if self._prompts:
                check_prompt_messages(example.payload, where="")
        except DatasetError:
            where = example_location(self._source, self._owner, index)
            example = to_example(item, where=where)
            if self._prompts:
                check_prompt_messages(example.payload, where=where)
            raise
        return example  # type: ignore[return-value]


async def open_dataset(
    env: Environment[Any, Any],
    split: DatasetSplit,
    base_dir: Path | Sequence[Path],
    *,
    max_examples: int | None = None,
) -> Any:
    """``env.create_dataset(split, base_dir)``, with ``max_examples`` when its signature takes it
    (``base_dir`` may be the directories to look in: see :func:`locate_dataset`)."""
    return (await locate_dataset(env, split, base_dir, max_examples=max_examples))[0]


async def locate_dataset(
    env: Environment[Any, Any],
    split: DatasetSplit,
    base_dir: Path | Sequence[Path],
    *,
    max_examples: int | None = None,
) -> tuple[Any, Path]:
    """The dataset of ``split`` and the directory it was found in.

    With several directories, each that exists is given to ``create_dataset`` in
    turn until one does not raise ``FileNotFoundError`` (``DatasetNotFound`` is
    one); when none has the data, the error says every place looked and why
    each failed, and how to name the right one (``--data-dir``).
    """
    candidates = [base_dir] if isinstance(base_dir, Path) else list(base_dir)
    if len(candidates) == 1:
        return await _create_dataset(env, split, candidates[0], max_examples), candidates[0]
    looked: list[str] = []
    for index, directory in enumerate(candidates):
        if index and not directory.is_dir():
            looked.append(f"{directory} (no such directory)")
            continue
        try:
            return await _create_dataset(env, split, directory, max_examples), directory
        except FileNotFoundError as exc:
            looked.append(f"{directory} ({exc})")
    places = "; ".join(looked)
    raise DatasetNotFound(
        f"{type(env).__name__}.create_dataset({split!r}) found no data in any of the places looked: {places}. "
        "Give the data directory with --data-dir DIR (base_dir of create_dataset)"
    )


async def _create_dataset(
    env: Environment[Any, Any], split: DatasetSplit, base_dir: Path, max_examples: int | None
) -> Any:
    if _accepts_max_examples(env.create_dataset):
        dataset = await env.create_dataset(split, base_dir, max_examples=max_examples)
    else:
        dataset = await env.create_dataset(split, base_dir)
    if dataset is None:
        raise DatasetError(
            f"{type(env).__name__}.create_dataset({split!r}) returned None; return a Dataset (e.g. JsonlDataset(...))"
        )
    return dataset


def example_location(dataset: object, owner: str, index: int) -> str:
    """``file:line`` (or ``file row N``) for an example read from a file, else the dataset's name and the index."""
    location_of = getattr(dataset, "location_of", None)
    if callable(location_of):
        try:
            return str(location_of(index))
        except (IndexError, TypeError, ValueError):
            pass
    line_of = getattr(dataset, "line_of", None)
    path = getattr(dataset, "path", None)
    if line_of is not None and path is not None:
        try:
            return f"{path}:{line_of(index)}"
        except (IndexError, TypeError):
            pass
    return f"{owner}[{index}]"


def _accepts_max_examples(method: Any) -> bool:
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return True
    return "max_examples" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _environment_class(value: object, where: str) -> type[Environment[Any, Any]]:
    if inspect.isclass(value) and issubclass(value, Environment):
        return value
    raise EnvSpecError(f"{where} is not an environment class (a subclass of benchmax.envs.BaseEnv or Environment)")



def module_name_for(file: Path) -> str:
    """A readable module name for an env file, stable across processes: ``<directory>.<stem>``.

    ``examples/sql/env.py`` loads as ``sql.env``, so its class shows as
    ``sql.env.SqlEnv`` in runs, logs and errors of every run. Another file with
    the same directory and stem in the same process gets a numbered name.
    """
    resolved = file.resolve()
    with _modules_lock:
        known = _module_names.get(resolved)
        if known is not None:
            return known
        parent = _identifier(resolved.parent.name) or "envs"
        base = f"{parent}.{_identifier(resolved.stem) or 'env'}"
        taken = set(_module_names.values())
        name, number = base, 1
        while name in taken or (name in sys.modules and getattr(sys.modules[name], "__file__", None) != str(resolved)):
            number += 1
            name = f"{base}_{number}"
        _module_names[resolved] = name
        return name


def _identifier(text: str) -> str:
    cleaned = re.sub(r"\W+", "_", text).strip("_")
    return f"_{cleaned}" if cleaned[:1].isdigit() else cleaned


def _import_file(file: Path) -> Any:
    if not file.is_file():
        raise EnvSpecError(f"{file}: env file not found")
    resolved = file.resolve()
    name = module_name_for(resolved)
    # Reuse the module only while the file is unchanged: a rescore or validate in a
    # long-lived process (a notebook) must see the env code as it is now.
    status = resolved.stat()
    stamp = (status.st_mtime_ns, status.st_size)
    cached = sys.modules.get(name)
    if cached is not None and getattr(cached, "__benchmax_stamp__", None) == stamp:
        return cached
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise EnvSpecError(f"{file}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    module.__benchmax_stamp__ = stamp  # type: ignore[attr-defined]
    sys.modules[name] = module
    parent = str(resolved.parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        where = _location(file, resolved, exc)
        raise EnvSpecError(f"{where}: importing it raised {type(exc).__name__}: {exc}{_extra_hint(exc)}") from exc
    finally:
        if added:
            sys.path.remove(parent)
    return module


_EXTRAS = {
    "httpx": "openai",
    "openai": "openai",
    "llama_cpp": "local",
    "math_verify": "rewards",
    "mcp": "mcp",
    "datasets": "hf",
    "ray": "ray",
    "pyarrow": "export",
    "starlette": "serve",
    "reasoning_gym": "gallery",
    "bm25s": "gallery",
    "docker": "docker",
    "opentelemetry": "otel",
}
"""The modules benchmax's extras install, by the extra that brings each (pyproject.toml)."""


def _extra_hint(exc: BaseException) -> str:
    """``; it comes with benchmax's `openai` extra: ...`` for a missing module an extra installs."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return ""
    extra = _EXTRAS.get(exc.name.partition(".")[0])
    if extra is None:
        return ""
    return (
        f"; it comes with benchmax's {extra!r} extra: pip install 'benchmax[{extra}]'"
        f" (in a clone: pip install -e '.[{extra}]')"
    )


def _location(file: Path, resolved: Path, exc: BaseException) -> str:
    """``file:line`` of the env file's line that raised (or imported what raised)."""
    if isinstance(exc, SyntaxError) and exc.filename == str(resolved) and exc.lineno:
        return f"{file}:{exc.lineno}"
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == str(resolved)]
    return f"{file}:{lines[-1]}" if lines else str(file)
