"""``benchmax inspect``: a local web page over run stores.

It reads the store only (never the engine), so it can watch a run that is still
being written, or open one copied from another machine.
"""

from benchmax.inspector.app import create_app
from benchmax.inspector.export import export_static
from benchmax.inspector.security import AccessGuard, is_loopback, normalize_origin
from benchmax.inspector.server import InspectorError, bind, resolve_token, serve

__all__ = [
    "AccessGuard",
    "InspectorError",
    "bind",
    "create_app",
    "export_static",
    "is_loopback",
    "normalize_origin",
    "resolve_token",
    "serve",
]
