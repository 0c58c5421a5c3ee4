"""benchmax 0.2.x's module path ``benchmax.envs.harbor.dep_check``: its names, from where they live now."""

from benchmax.envs.harbor._deps import require_harbor

__all__ = ["require_harbor"]
