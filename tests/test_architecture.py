"""The layout is the architecture: data flows one way, and packages meet only at their surfaces.

envs (the contract) <- client <- engine <- runner <- faces (cli, train, inspector); rewards and
tools sit beside the contract for env code; store is beside the runner and the inspector reads
only the store. Every import in ``src/benchmax`` is checked, lazy ones inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "benchmax"

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "aio": set(),
    "auth": {"aio", "errors"},
    "envs": {"auth", "errors"},
    "envs.harbor": {"envs", "sandbox", "auth", "errors"},
    "client": {"envs", "auth", "errors"},
    "sandbox": {"envs", "aio", "errors"},
    "testing": {"envs", "client", "errors"},
    "rewards": {"envs", "client", "sandbox", "auth", "errors"},
    "tools": {"envs", "errors"},
    "rag": {"envs", "rewards", "client", "auth", "errors"},
    "sft": {"envs", "errors"},
    "bundle": {"envs", "errors"},
    "engine": {"envs", "client", "auth", "errors"},
    "local": {"client", "envs", "errors"},
    "store": {"envs", "errors"},
    "runner": {"envs", "client", "engine", "store", "local", "auth", "aio", "errors"},
    "inspector": {"store", "auth", "errors"},
    "serve": {"envs", "inspector", "errors"},
    "train": {"runner", "engine", "client", "envs", "local", "auth", "aio", "errors"},
    "cli": {
        "runner",
        "store",
        "engine",
        "client",
        "envs",
        "inspector",
        "serve",
        "train",
        "local",
        "testing",
        "auth",
        "errors",
    },
    "__init__": {"runner", "store", "errors"},
}
"""What each package may import besides itself. ``envs`` reaches the engine only through the
registry in ``envs/_runtime.py`` (by name, at run time), never by an import. ``serve`` (an env over
HTTP) is a face beside the inspector: it holds an env (the contract) and no engine (the model loop
runs at the client, through ``envs.RemoteEnv``), and it reuses the inspector's access rule (loopback
only, a token for anything else) rather than keeping a second one."""


SHIPPED_ENVS = {("envs", "harbor")}
"""Envs that live under ``envs/`` for 0.2.x's import paths: env code, not the contract, so they may use
what env code uses (sandboxes) while the contract itself may not."""


def _package(path: Path) -> str:
    relative = path.relative_to(SRC)
    if tuple(relative.parts[:2]) in SHIPPED_ENVS:
        return ".".join(relative.parts[:2])
    return (
        relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 or relative.stem != "__init__" else "__init__"
    )


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name == "benchmax" or name.startswith("benchmax.")]


FILES = sorted(SRC.rglob("*.py"))


def test_every_package_of_src_is_placed_in_the_flow():
    packages = {_package(path) for path in FILES}
    assert packages <= set(ALLOWED), f"place {sorted(packages - set(ALLOWED))} in ALLOWED"


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(SRC)))
def test_imports_follow_the_flow_and_meet_at_package_surfaces(path):
    own = _package(path)
    problems = []
    modules = {str(module.relative_to(SRC.parent)).removesuffix(".py").replace("/", ".") for module in FILES}
    for line, name in _imports(path):
        parts = name.split(".")
        if len(parts) < 2:
            continue
        target = parts[1]
        if own in {".".join(shipped) for shipped in SHIPPED_ENVS} and tuple(parts[1:3]) in SHIPPED_ENVS:
            target = own
        if target == own or target == "__version__":
            continue
        if target not in ALLOWED.get(own, set()):
            problems.append(f"{path.relative_to(SRC)}:{line} imports {name}: {own} may not depend on {target}")
        private = [part for part in parts[2:] if part.startswith("_") and not part.startswith("__")]
        if private and ".".join(parts[: parts.index(private[0]) + 1]) in modules:
            problems.append(f"{path.relative_to(SRC)}:{line} imports {name}: use {target}'s package surface")
    assert not problems, "\n".join(problems)
