"""Bundling an env class with the project source it needs, and loading it back.

cloudpickle serialises the env class by value; whatever else it references
by name (a module of the env's own project, say) would be missing on the
machine that loads the bundle. So after pickling, the references are read
back out of the pickle's opcodes (statically: nothing in it is executed) and
sorted into:

- the standard library, benchmax and installed distributions (site-packages):
  fine, the runtime has or installs them;
- modules of the env's own project (under the ``pyproject.toml`` nearest the
  env's file): pickled by value too, automatically unless
  ``auto_local_modules=False``;
- source from anywhere else: refused unless its distribution is declared in
  ``pip_dependencies`` or its module is passed in ``local_modules``.

An ``import`` statement inside a method runs only on the loading machine, where
by-value modules are not importable; such imports of local source are refused
too. Imports whose module name is computed at run time cannot be seen; declare
their distributions.
"""

from __future__ import annotations

import contextlib
import dis
import importlib
import importlib.util
import inspect
import logging
import pickletools
import site
import sys
import threading
from collections.abc import Iterator, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import cloudpickle
from packaging.utils import canonicalize_name

from benchmax.bundle._artifact import (
    Bundle,
    BundleMetadata,
    BundlingError,
    benchmax_version,
    declared_distributions,
    normalize_pip_dependencies,
    validate_bundle_compatibility,
)
from benchmax.envs import Environment

logger = logging.getLogger("benchmax.bundle")

# cloudpickle's by-value registry is process-global; one bundle at a time.
_REGISTRY_LOCK = threading.Lock()
_MAX_ROUNDS = 10
_STRING_OPS = frozenset(
    {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}
)
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_IMPORTERS = frozenset({"import_module", "__import__"})


def dump_bundle(
    env_class: type[Environment],
    *,
    constructor_args: dict[str, Any] | None = None,
    pip_dependencies: Sequence[str] | None = None,
    local_modules: list[ModuleType] | None = None,
    env_class_source: str | None = None,
    auto_local_modules: bool = True,
) -> Bundle:
    """Pickle ``(env_class, constructor_args)`` with the local source it needs, and stamp metadata.

    ``pip_dependencies`` (PEP 508) are recorded, not installed; list every
    prerelease you need explicitly, even a transitive one. ``local_modules``
    are extra modules to carry by value. ``env_class_source`` overrides the
    recorded source (for classes made by ``exec``). Raises
    :class:`BundlingError` naming what to pass or declare.
    """
    _check_env_class(env_class)
    args = dict(constructor_args or {})
    try:
        dependencies = normalize_pip_dependencies(() if pip_dependencies is None else pip_dependencies)
    except (TypeError, ValueError) as exc:
        raise BundlingError(f"Invalid pip_dependencies: {exc}") from exc
    version = benchmax_version()
    if version == "unknown":
        raise BundlingError("Cannot determine the benchmax version; install benchmax as a versioned package first")
    explicit = list(local_modules or [])
    for module in explicit:
        if not isinstance(module, ModuleType):
            raise BundlingError(f"local_modules must contain module objects, got {type(module).__name__}: {module!r}")
    roots = _project_roots([sys.modules.get(env_class.__module__), *explicit])
    declared = declared_distributions(dependencies)

    with _REGISTRY_LOCK:
        carried = list(explicit)
        pickled = _pickle_with(env_class, args, carried)
        rounds = 0
        while auto_local_modules and rounds < _MAX_ROUNDS:
            rounds += 1
            wanted = [name for name in _local_refs(pickled, roots) if name not in {m.__name__ for m in carried}]
            modules = [module for module in map(_try_import, wanted) if module is not None]
            if not modules:
                break
            logger.warning(
                "[bundle] %s: auto-bundling local module(s): %s",
                env_class.__name__,
                ", ".join(sorted(module.__name__ for module in modules)),
            )
            carried.extend(modules)
            pickled = _pickle_with(env_class, args, carried)

    missing = _local_refs(pickled, roots)
    if missing:
        message = f"{env_class.__name__}: missing local_modules=[{', '.join(missing)}]"
        if explicit:
            message += f" (already registered: [{', '.join(sorted(m.__name__ for m in explicit))}])"
        raise BundlingError(message)
    outside = [
        name
        for name in sorted(_referenced_modules(pickled))
        if _is_outside_source(name, roots) and not _declared(name, declared)
    ]
    if outside:
        raise BundlingError(
            f"{env_class.__name__}: referenced source outside the environment project: {', '.join(outside)}. "
            "Pass the module object in local_modules to capture it, or declare its distribution in "
            "pip_dependencies to keep it as a remote dependency."
        )
    late = sorted(
        name
        for name in _late_imports(env_class, carried)
        if (_is_local(name, roots) or _is_outside_source(name, roots)) and not _declared(name, declared)
    )
    if late:
        raise BundlingError(
            f"{env_class.__name__}: delayed import of local source cannot be captured safely: {', '.join(late)}. "
            "Move the import to module scope so cloudpickle can capture the reference, or install the module "
            "remotely and declare its distribution in pip_dependencies. Passing it in local_modules does not "
            "satisfy a later import statement."
        )
    metadata = BundleMetadata(
        pip_dependencies=dependencies,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        benchmax_version=version,
        env_class_source=env_class_source if env_class_source is not None else _source(env_class),
    )
    logger.info(
        "[bundle] dumped %s: %.1f KB pickled, %d pip deps", env_class.__name__, len(pickled) / 1024, len(dependencies)
    )
    return Bundle(pickled=pickled, metadata=metadata)


def load_bundle(bundle: Bundle, *, instantiate: bool = True) -> Environment | tuple[type[Environment], dict[str, Any]]:
    """The env (``env_class(**constructor_args)``), or with ``instantiate=False`` the pair itself.

    Checks the Python and benchmax versions first (:func:`validate_bundle_compatibility`)
    and never installs dependencies: the runtime image must have them. Only
    load bundles you trust: unpickling runs code.
    """
    validate_bundle_compatibility(bundle.metadata)
    try:
        payload = cloudpickle.loads(bundle.pickled)
    except Exception as exc:
        raise BundlingError(f"Failed to unpickle bundle: {exc}") from exc
    if not (isinstance(payload, tuple) and len(payload) == 2):
        raise BundlingError(
            f"Unpickled payload is {type(payload).__name__}, expected (env_class, constructor_args) tuple."
        )
    env_class, args = payload
    if not (isinstance(env_class, type) and issubclass(env_class, Environment)):
        raise BundlingError(f"Unpickled class is {type(env_class).__name__}, not an Environment implementation.")
    if not isinstance(args, dict):
        raise BundlingError(f"Unpickled constructor_args is {type(args).__name__}, expected dict.")
    if not instantiate:
        return env_class, args
    logger.info("[bundle] instantiating %s", env_class.__name__)
    return env_class(**args)


def unregistered_local_refs(pickled: bytes) -> list[str]:
    """Modules ``pickled`` refers to by name that live in a local project (not installed), sorted.

    For inspecting a pickle on its own: the project roots are guessed from the
    referenced modules. :func:`dump_bundle` knows the env's root and uses it.
    """
    roots = _project_roots([_module(name) for name in _referenced_modules(pickled)])
    return _local_refs(pickled, roots)


def _check_env_class(env_class: object) -> None:
    if not (isinstance(env_class, type) and issubclass(env_class, Environment)):
        raise BundlingError(f"{env_class!r} does not implement Environment.")
    if env_class is Environment:
        raise BundlingError("Cannot bundle the Environment protocol; provide a concrete implementation.")
    abstract = sorted(getattr(env_class, "__abstractmethods__", ()))
    if abstract:
        raise BundlingError(f"{env_class.__name__} has unimplemented abstract methods: {', '.join(abstract)}")


def _pickle_with(env_class: type, args: dict[str, Any], by_value: Sequence[ModuleType]) -> bytes:
    registered = []
    try:
        for module in by_value:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        try:
            return cloudpickle.dumps((env_class, args))
        except Exception as exc:
            raise BundlingError(f"Failed to serialize {env_class.__name__}: {exc}") from exc
    finally:
        for module in reversed(registered):
            with contextlib.suppress(ValueError):
                cloudpickle.unregister_pickle_by_value(module)


def _source(env_class: type) -> str | None:
    try:
        return inspect.getsource(env_class)
    except (OSError, TypeError) as exc:
        logger.debug("[bundle] no source for %s: %s", env_class.__name__, exc)
        return None


def _try_import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def _referenced_modules(pickled: bytes) -> set[str]:
    """Every module the pickle imports by name when loaded, read from its opcodes.

    Globals name their module (``GLOBAL``, or two strings before
    ``STACK_GLOBAL``); a bare ``import foo`` kept in a function's globals is
    pickled as a call of cloudpickle's ``subimport`` with ``"foo"``, so the
    string argument after that global counts as well. Strings are followed
    through the memo.
    """
    found: set[str] = set()
    memo: dict[int, str | None] = {}
    recent: list[str | None] = [None, None]
    last: str | None = None
    awaiting_subimport = False
    try:
        for opcode, arg, _ in pickletools.genops(pickled):
            name = opcode.name
            if name == "MEMOIZE":
                memo[len(memo)] = last
                continue
            if name in _PUT_OPS:
                memo[arg] = last
                continue
            if name in ("FRAME", "PROTO", "MARK"):
                continue
            pushed: str | None = None
            if name in _STRING_OPS:
                pushed = arg.decode("latin-1") if isinstance(arg, bytes) else arg
            elif name in _GET_OPS:
                pushed = memo.get(arg)
            if awaiting_subimport:
                if pushed:
                    found.add(pushed)
                awaiting_subimport = False
            if name in ("GLOBAL", "STACK_GLOBAL"):
                if name == "GLOBAL":
                    module, _, attribute = str(arg).partition(" ")
                else:
                    module, attribute = recent[-2] or "", recent[-1] or ""
                if module:
                    found.add(module)
                awaiting_subimport = module.startswith("cloudpickle") and attribute == "subimport"
            last = pushed
            recent = [recent[-1], pushed]
    except ValueError:
        pass  # a truncated pickle: keep what was read
    return found


def _module(name: str) -> ModuleType | None:
    """The module, imported or only located (its loader is not run)."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    located = ModuleType(name)
    located.__spec__ = spec
    located.__file__ = spec.origin
    located.__path__ = spec.submodule_search_locations  # type: ignore[assignment]
    return located


def _source_paths(module: ModuleType) -> list[Path]:
    candidates: list[str] = []
    if isinstance(getattr(module, "__file__", None), str):
        candidates.append(module.__file__)  # type: ignore[arg-type]
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if isinstance(origin, str) and origin not in ("built-in", "frozen"):
        candidates.append(origin)
    candidates.extend(str(location) for location in (getattr(spec, "submodule_search_locations", None) or ()))
    paths: list[Path] = []
    for candidate in candidates:
        try:
            path = Path(candidate).resolve()
        except (OSError, RuntimeError):
            continue
        if path not in paths:
            paths.append(path)
    return paths


def _installed(path: Path) -> bool:
    for directory in (*site.getsitepackages(), site.getusersitepackages()):
        try:
            if path.is_relative_to(Path(directory).resolve()):
                return True
        except (OSError, RuntimeError):
            continue
    return False


def _project_root(path: Path) -> Path | None:
    directory = path if path.is_dir() else path.parent
    for candidate in (directory, *directory.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return None


def _project_roots(modules: Sequence[ModuleType | None]) -> tuple[Path, ...]:
    roots = set()
    for module in modules:
        if module is None:
            continue
        for path in _source_paths(module):
            if not _installed(path) and (root := _project_root(path)) is not None:
                roots.add(root)
                break
    return tuple(sorted(roots))


def _ignored(name: str) -> bool:
    top = name.partition(".")[0]
    return top in sys.stdlib_module_names or top == "benchmax"


def _is_local(name: str, roots: tuple[Path, ...]) -> bool:
    """Source of the env's own project, not installed."""
    if _ignored(name) or not roots or (module := _module(name)) is None:
        return False
    paths = _source_paths(module)
    return any(not _installed(path) and any(path.is_relative_to(root) for root in roots) for path in paths)


def _is_outside_source(name: str, roots: tuple[Path, ...]) -> bool:
    """Source on disk that is neither installed nor in the env's project: it has no owner yet."""
    if _ignored(name) or (module := _module(name)) is None:
        return False
    paths = _source_paths(module)
    return any(not _installed(path) and not any(path.is_relative_to(root) for root in roots) for path in paths)


def _local_refs(pickled: bytes, roots: tuple[Path, ...]) -> list[str]:
    return sorted(name for name in _referenced_modules(pickled) if _is_local(name, roots))


def _declared(name: str, distributions: set[str]) -> bool:
    """Whether an installed distribution that provides ``name``'s top-level package is declared."""
    owners = importlib_metadata.packages_distributions().get(name.partition(".")[0], ())
    return any(canonicalize_name(owner) in distributions for owner in owners)


def _late_imports(env_class: type, carried: Sequence[ModuleType]) -> set[str]:
    """Modules that code reachable from the env class imports when it runs (``import`` inside functions)."""
    carried_names = {module.__name__ for module in carried}
    owners = {env_class.__module__, *carried_names}
    names: set[str] = set()
    seen: set[int] = set()
    seen_code: set[int] = set()
    pending: list[object] = [env_class]
    while pending:
        value = pending.pop()
        if isinstance(value, staticmethod | classmethod):
            pending.append(value.__func__)
            continue
        if isinstance(value, property):
            pending.extend(accessor for accessor in (value.fget, value.fset, value.fdel) if accessor is not None)
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, ModuleType):
            if value.__name__ in carried_names:
                pending.extend(m for m in vars(value).values() if getattr(m, "__module__", None) == value.__name__)
            continue
        if isinstance(value, type):
            if value.__module__ in owners:
                pending.extend(vars(value).values())
            continue
        code = getattr(value, "__code__", None)
        owner = getattr(value, "__module__", None)
        if not isinstance(code, CodeType) or owner not in owners:
            continue
        names.update(_imports_in(code, owner, seen_code))
        scope = getattr(value, "__globals__", {})
        pending.extend(scope[name] for name in _all_names(code) if name in scope)
        pending.extend(getattr(value, "__defaults__", None) or ())
        pending.extend((getattr(value, "__kwdefaults__", None) or {}).values())
        for cell in getattr(value, "__closure__", None) or ():
            try:
                pending.append(cell.cell_contents)
            except ValueError:
                continue
    return names


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            yield from _code_objects(constant)


def _all_names(code: CodeType) -> set[str]:
    return {name for nested in _code_objects(code) for name in nested.co_names}


def _imports_in(code: CodeType, owner: str, seen: set[int]) -> set[str]:
    names: set[str] = set()
    for nested in _code_objects(code):
        if id(nested) in seen:
            continue
        seen.add(id(nested))
        instructions = list(dis.get_instructions(nested))
        for index, instruction in enumerate(instructions):
            if instruction.opname == "IMPORT_NAME" and isinstance(instruction.argval, str):
                level = _const(instructions, index - 2)
                fromlist = _const(instructions, index - 1)
                base = _absolute(instruction.argval, owner, level if isinstance(level, int) else 0)
                if base:
                    names.add(base)
                    if not instruction.argval and isinstance(fromlist, tuple):
                        names.update(f"{base}.{item}" for item in fromlist if isinstance(item, str) and item != "*")
            elif instruction.argval in _IMPORTERS and instruction.opname in (
                "LOAD_GLOBAL",
                "LOAD_NAME",
                "LOAD_ATTR",
                "LOAD_METHOD",
            ):
                literal = _next_string_argument(instructions, index + 1)
                if literal:
                    names.add(literal)
    return names


def _const(instructions: Sequence[dis.Instruction], index: int) -> object:
    if index >= 0 and instructions[index].opname == "LOAD_CONST":
        return instructions[index].argval
    return None


def _next_string_argument(instructions: Sequence[dis.Instruction], start: int) -> str | None:
    """The first literal string loaded before the call that ``instructions[start - 1]`` sets up."""
    for instruction in instructions[start:]:
        if instruction.opname in ("CALL", "CALL_FUNCTION", "CALL_METHOD", "RETURN_VALUE"):
            return None
        if instruction.opname == "LOAD_CONST" and isinstance(instruction.argval, str) and instruction.argval:
            return instruction.argval
    return None


def _absolute(name: str, owner: str, level: int) -> str | None:
    if level == 0:
        return name or None
    module = sys.modules.get(owner)
    package = getattr(module, "__package__", None) or owner.rpartition(".")[0]
    if not package:
        return None
    try:
        return importlib.util.resolve_name("." * level + name, package)
    except (ImportError, ValueError):
        return None
