"""The layout is the architecture: data flows one way, and packages meet only at their surfaces.

envs (the contract) <- client <- engine <- runner <- faces (cli, train, inspector); rewards and
tools sit beside the contract for env code; store is beside the runner and the inspector reads
only the store. Loading an env (loading), a served env and its wire format (remote) and Hugging
Face datasets (hf) sit on the contract, and so do other frameworks' envs (adapters, which loading
hands ``inspect:``, ``reasoning-gym:``, ... specs to); the shipped envs (harbor, rag) are env code like anyone's.
Every import in ``src/benchmax`` is checked, lazy ones inside functions included, with no
exceptions list: no import against the flow, and no private name (``_module`` or ``_name``)
imported from another package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "benchmax"

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "aio": set(),
    "bounded": {"errors"},
    "access": {"errors"},
    "compat": set(),
    "auth": {"aio", "errors"},
    "envs": {"auth", "errors"},
    "remote": {"envs", "auth", "bounded", "errors"},
    "adapters": {"envs", "rewards", "errors"},
    "loading": {"envs", "remote", "adapters", "errors"},
    "hf": {"envs", "errors"},
    "telemetry": {"envs", "errors"},
    "client": {"envs", "auth", "bounded", "telemetry", "errors"},
    "sandbox": {"envs", "aio", "errors"},
    "harbor": {"envs", "sandbox", "auth", "errors"},
    "testing": {"envs", "client", "errors"},
    "rewards": {"envs", "client", "sandbox", "auth", "errors"},
    "tools": {"envs", "errors"},
    "rag": {"envs", "rewards", "client", "auth", "errors"},
    "sft": {"envs", "errors"},
    "bundle": {"envs", "errors"},
    "engine": {"envs", "client", "auth", "telemetry", "errors"},
    "proxy": {"envs", "client", "auth", "errors"},
    "agents": {"envs", "client", "proxy", "sandbox", "auth", "errors"},
    "traces": {"envs", "errors"},
    "local": {"client", "envs", "bounded", "errors"},
    "store": {"envs", "errors"},
    "mix": {"envs", "loading", "errors"},
    "runner": {
        "envs",
        "loading",
        "mix",
        "client",
        "engine",
        "store",
        "local",
        "traces",
        "auth",
        "aio",
        "telemetry",
        "errors",
    },
    "inspector": {"store", "auth", "access", "errors"},
    "serve": {"envs", "loading", "remote", "access", "errors"},
    "train": {"runner", "mix", "engine", "client", "envs", "loading", "local", "auth", "aio", "telemetry", "errors"},
    "cli": {
        "runner",
        "store",
        "engine",
        "client",
        "envs",
        "loading",
        "mix",
        "remote",
        "inspector",
        "access",
        "serve",
        "train",
        "local",
        "testing",
        "telemetry",
        "traces",
        "auth",
        "errors",
    },
    "__init__": {"compat", "runner", "store", "errors"},
}
"""What each package may import besides itself. ``envs`` reaches the engine only through the
registry in ``envs/_runtime.py`` (by name, at run time), never by an import. ``serve`` (an env over
HTTP) is a face beside the inspector: it holds an env (the contract) and no engine (the model loop
runs at the client, through ``remote.RemoteEnv``, which speaks the same ``remote.wire``); it and
the inspector share one access rule (a token, loopback without one only when asked), ``access``,
which sits below both so neither face imports the other. ``bounded`` is the one reader of a network
peer's reply (a bound on its decoded size), beneath every package that reads one. ``compat`` imports
nothing: it names 0.2.x's homes by string and is installed by
``benchmax/__init__.py``."""


def _package(path: Path) -> str:
    relative = path.relative_to(SRC)
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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


FILES = sorted(SRC.rglob("*.py"))


def test_every_package_of_src_is_placed_in_the_flow():
    packages = {_package(path) for path in FILES}
    assert packages <= set(ALLOWED), f"place {sorted(packages - set(ALLOWED))} in ALLOWED"


def _problems(path: Path, own: str) -> list[str]:
    problems = []
    for line, name in _imports(path):
        parts = name.split(".")
        if len(parts) < 2:
            continue
        target = parts[1].removesuffix(".py")
        if target == own or target == "__version__":
            continue
        if target not in ALLOWED.get(own, set()):
            problems.append(f"{path.name}:{line} imports {name}: {own} may not depend on {target}")
        if any(_private(part) for part in parts[1:]):
            problems.append(f"{path.name}:{line} imports {name}: a private name of {target}")
    return problems


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(SRC)))
def test_imports_follow_the_flow_and_meet_at_package_surfaces(path):
    problems = _problems(path, _package(path))
    assert not problems, "\n".join(problems)


def test_the_check_finds_an_up_arrow_and_each_kind_of_private_name(tmp_path):
    """Written as if it were in ``envs``: the import of a sandbox (what ``envs/harbor`` did), a private
    name of a public module, a private module, and a lazy import inside a function are all found."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from benchmax.sandbox import Sandbox\n"
        "from benchmax.auth import _redact\n"
        "from benchmax.client._calls import call\n"
        "def later():\n"
        "    import benchmax.engine\n"
        "from benchmax.envs._types import Tool\n"
        "from benchmax import __version__\n"
    )
    problems = _problems(module, "envs")
    assert problems == [
        "probe.py:1 imports benchmax.sandbox: envs may not depend on sandbox",
        "probe.py:1 imports benchmax.sandbox.Sandbox: envs may not depend on sandbox",
        "probe.py:2 imports benchmax.auth._redact: a private name of auth",
        "probe.py:3 imports benchmax.client._calls: envs may not depend on client",
        "probe.py:3 imports benchmax.client._calls: a private name of client",
        "probe.py:3 imports benchmax.client._calls.call: envs may not depend on client",
        "probe.py:3 imports benchmax.client._calls.call: a private name of client",
        "probe.py:5 imports benchmax.engine: envs may not depend on engine",
    ]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in FILES}


def _edges(path: Path) -> set[str]:
    """The modules of its own package that ``path`` imports, lazy and ``TYPE_CHECKING`` ones included
    (the package's ``__init__`` left out: it imports its modules to re-export them)."""
    own = _module_name(path).rsplit(".", 1)[0] if path.stem != "__init__" else _module_name(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name in MODULES and name != own and name.rsplit(".", 1)[0] == own:
                found.add(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle of ``graph`` once, as the modules around it (Tarjan's strongly connected parts)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                item = stack.pop()
                part.append(item)
                if item == node:
                    break
            if len(part) > 1 or node in graph.get(node, ()):
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back_through_others_of_its_package():
    """Inside a package, imports go one way too: a circle (``a -> b -> a``), even one closed by an
    import inside a function or under ``TYPE_CHECKING``, is two modules that are one idea, or a
    name living in the wrong one."""
    graph = {name: _edges(path) for name, path in MODULES.items()}
    assert _cycles(graph) == []


def test_the_circle_check_finds_a_circle_closed_inside_a_function():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}, "p.e": set()}
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]
    assert _cycles({"p.a": {"p.b"}, "p.b": set()}) == []


ENVS_LINES = 2_500
"""The contract stays small enough to read in a sitting: ``envs/`` under this many lines (the env-driven
turns, levelled and endless datasets are in it)."""
MODULE_LINES = 600
FUNCTION_LINES = 100
STILL_OVER = {"runner/_run.py:_schedule", "serve/_app.py:create_app"}
"""Functions over ``FUNCTION_LINES`` not yet split into named steps. The list only shrinks: a
function that comes under the budget must leave it, and no other may join it."""


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_envs_stays_under_its_line_budget():
    total = sum(_lines(path) for path in (SRC / "envs").rglob("*.py"))
    assert total < ENVS_LINES, f"envs/ holds {total} lines"


def test_no_module_is_over_its_line_budget():
    over = {str(path.relative_to(SRC)): _lines(path) for path in FILES if _lines(path) > MODULE_LINES}
    assert over == {}


def _long_functions() -> dict[str, int]:
    found = {}
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    found[f"{path.relative_to(SRC)}:{node.name}"] = length
    return found


def test_no_function_is_over_its_line_budget_but_those_still_listed():
    found = _long_functions()
    assert sorted(set(found) - STILL_OVER) == [], f"split these into named steps: {found}"
    assert sorted(STILL_OVER - set(found)) == [], "under the budget now: take them off STILL_OVER"
