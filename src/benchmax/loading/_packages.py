"""Envs installed as Python packages: what their ``benchmax.envs`` entry points declare.

An env package declares ``[project.entry-points."benchmax.envs"] NAME =
"package.module:EnvClass"``; ``pip install`` writes that into the distribution's
metadata, and benchmax finds the env by NAME. Listing reads metadata and parses
the env's source file (never executes it), so ``benchmax list`` stays fast and
an env whose import is broken or slow still shows; only loading imports.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.metadata
import importlib.util
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.envs import EnvSpecError

ENTRY_POINT_GROUP = "benchmax.envs"
"""Installed env packages declare themselves here: ``name = "package.module:EnvClass"``."""

_MAX_PARSED_BYTES = 2_000_000
"""Source files larger than this are not parsed for a docstring (the summary is shown instead)."""
_MAX_DESCRIPTION = 160


@dataclass(frozen=True, slots=True)
class InstalledEnv:
    """One ``benchmax.envs`` entry point and the distribution that declares it."""

    name: str
    value: str
    """``package.module:EnvClass``, as the entry point declares it."""
    distribution: str | None
    version: str | None
    summary: str = ""
    """The distribution's one-line summary (its ``description`` in pyproject.toml)."""

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    @property
    def attribute(self) -> str:
        return self.value.partition(":")[2].strip()

    @property
    def label(self) -> str:
        """How messages name it: ``'name' (package.module:Class from dist 1.0)``."""
        origin = f"{self.distribution} {self.version}" if self.distribution else "an unnamed distribution"
        return f"the installed env {self.name!r} ({self.value} from {origin})"

    def source_file(self) -> Path | None:
        """The file of the entry point's module, found without importing anything."""
        return _module_origin(self.module)

    def description(self) -> str:
        """The env class's docstring's first line, read from its source; else the distribution summary."""
        return _class_summary(self.source_file(), self.attribute) or _one_line(self.summary)

    def load(self) -> Any:
        """Import the entry point; an error names the entry point, its distribution and the failing line."""
        module_name = self.module
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            gone = exc.name if isinstance(exc, ModuleNotFoundError) else None
            missing = gone is not None and (module_name == gone or module_name.startswith(f"{gone}."))
            if missing:
                advice = (
                    f"its module {module_name!r} is not importable: the distribution's files are gone or were "
                    f"moved (an editable install whose source moved); reinstall it"
                )
            else:
                advice = f"importing {module_name} raised {type(exc).__name__}: {exc}{_frame(exc)}"
            raise EnvSpecError(f"{self.label} failed to load: {advice}") from exc
        value: Any = module
        for part in self.attribute.split(".") if self.attribute else ():
            try:
                value = getattr(value, part)
            except AttributeError:
                raise EnvSpecError(
                    f"{self.label} failed to load: {module_name} has no attribute {self.attribute!r}; "
                    "fix the entry point in the package's pyproject.toml and reinstall it"
                ) from None
        return value


def installed_envs() -> tuple[InstalledEnv, ...]:
    """Every installed env, sorted by name; a name two distributions declare appears twice."""
    found: dict[tuple[str, str | None], InstalledEnv] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(point, "dist", None)
        name = dist.metadata["Name"] if dist is not None else None
        key = (point.name, name)
        if key in found:
            continue  # the same distribution seen twice on sys.path: the first one is what imports
        found[key] = InstalledEnv(
            name=point.name,
            value=point.value,
            distribution=name,
            version=dist.version if dist is not None else None,
            summary=(dist.metadata.get("Summary") or "") if dist is not None else "",
        )
    return tuple(sorted(found.values(), key=lambda env: (env.name, env.distribution or "")))


def find_installed(name: str) -> InstalledEnv | None:
    """The installed env called ``name``; two distributions declaring it is an error naming both."""
    matches = [env for env in installed_envs() if env.name == name]
    if len(matches) > 1:
        listed = "; ".join(f"{env.distribution} {env.version} ({env.value})" for env in matches)
        raise EnvSpecError(
            f"the env name {name!r} is declared by {len(matches)} installed distributions: {listed}; "
            "uninstall all but one (pip uninstall DIST), or name the class as package.module:Class"
        )
    return matches[0] if matches else None


def _module_origin(module: str) -> Path | None:
    """Where ``module`` would be imported from, without running any package's ``__init__``.

    ``importlib.util.find_spec("a.b")`` imports ``a``; walking the parts with the
    path finder over each parent's search locations does not.
    """
    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for index in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = importlib.machinery.PathFinder.find_spec(
                ".".join(parts[: index + 1]), list(spec.submodule_search_locations)
            )
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    return Path(spec.origin)


def _class_summary(file: Path | None, attribute: str) -> str:
    """The first docstring line of class ``attribute`` defined at the top of ``file``."""
    if file is None or not attribute or "." in attribute or file.suffix != ".py":
        return ""
    try:
        if file.stat().st_size > _MAX_PARSED_BYTES:
            return ""
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except (OSError, SyntaxError, ValueError):
        return ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == attribute:
            return _one_line(ast.get_docstring(node) or "")
    return ""


def _one_line(text: str) -> str:
    line = next((line.strip() for line in text.strip().splitlines() if line.strip()), "")
    return line if len(line) <= _MAX_DESCRIPTION else line[: _MAX_DESCRIPTION - 1] + "…"


def _frame(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [frame for frame in frames if "importlib" not in frame.filename]
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" (at {exc.filename}:{exc.lineno})"
    return f" (at {inside[-1].filename}:{inside[-1].lineno})" if inside else ""
