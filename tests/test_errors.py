"""The exception tree drawn in ``benchmax.errors``'s docstring is the tree in the code: every
exception class in ``src/benchmax`` is drawn, under its own parent, with its other bases and its
package, and nothing is drawn that the code does not hold."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import benchmax.errors

SRC = Path(__file__).resolve().parents[1] / "src" / "benchmax"
_BUILTIN = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}
_LINE = re.compile(r"^(?P<lead>[│├└─ ]*)(?P<name>\w+)(?: \((?P<also>[\w, ]+)\))?\s+(?P<home>benchmax\.\w+)$")


def _code_tree() -> dict[str, tuple[list[str], str]]:
    """``{class: (bases, package)}`` for every class in src that is an exception (by its bases)."""
    found: dict[str, tuple[list[str], str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        home = "benchmax." + (relative.stem if len(relative.parts) == 1 else relative.parts[0])
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, ([ast.unparse(base).split(".")[-1] for base in node.bases], home))
    exceptions: dict[str, tuple[list[str], str]] = {}
    grew = True
    while grew:
        grew = False
        for name, (bases, home) in found.items():
            if name not in exceptions and any(base in exceptions or base in _BUILTIN for base in bases):
                exceptions[name] = (bases, home)
                grew = True
    return exceptions


def _drawn() -> dict[str, tuple[str | None, list[str], str]]:
    """``{class: (drawn parent, other bases, package)}`` as the docstring draws them."""
    drawn: dict[str, tuple[str | None, list[str], str]] = {}
    stack: list[str] = []
    for raw in (benchmax.errors.__doc__ or "").splitlines():
        line = raw.removeprefix("    ").rstrip()
        match = _LINE.match(line)
        if match is None or not raw.startswith("    "):
            continue
        depth = len(match["lead"]) // 4
        also = [item.strip() for item in (match["also"] or "").split(",") if item.strip()]
        if depth == 0:
            stack = [match["name"]]
            drawn[match["name"]] = (None, also, match["home"])
            continue
        del stack[depth:]
        drawn[match["name"]] = (stack[-1], also, match["home"])
        stack.append(match["name"])
    return drawn


def test_every_exception_class_is_drawn_under_its_parent_with_its_other_bases_and_package():
    code, drawn = _code_tree(), _drawn()
    assert len(code) > 40  # the scan found the tree, not nothing
    assert sorted(set(code) - set(drawn)) == [], "draw these in benchmax/errors.py's docstring"
    assert sorted(set(drawn) - set(code)) == [], "drawn in benchmax/errors.py but not in the code"
    for name, (parent, also, home) in drawn.items():
        bases, package = code[name]
        expected = [base for base in bases if base != parent]
        assert (parent is None or parent in bases, also, home) == (True, expected, package), name


def test_the_drawing_puts_every_public_error_under_the_root():
    drawn = _drawn()
    under_root = set()
    for name in drawn:
        node: str | None = name
        while node is not None and node != "BenchmaxError":
            node = drawn[node][0]
        if node == "BenchmaxError":
            under_root.add(name)
    assert {"StoreError", "MixError", "JudgeError", "EndpointError", "DatasetNotFound"} <= under_root
    assert drawn["MixError"][0] == "EnvSpecError"
