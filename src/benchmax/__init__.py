"""benchmax: reinforcement-learning environments for LLMs.

``import benchmax`` stays light: the runner and store load on first use.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from benchmax import compat

compat.install()

try:
    __version__ = version("benchmax")
except PackageNotFoundError:
    __version__ = "0.0.0"

if TYPE_CHECKING:
    from benchmax.runner import evaluate
    from benchmax.store import open_run

__all__ = ["__version__", "evaluate", "open_run"]


def __getattr__(name: str) -> Any:
    if name == "evaluate":
        from benchmax.runner import evaluate

        return evaluate
    if name == "open_run":
        from benchmax.store import open_run

        return open_run
    raise AttributeError(f"module 'benchmax' has no attribute {name!r}")
