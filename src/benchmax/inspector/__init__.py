"""``benchmax inspect``: a local web page over run stores.

It reads the store only (never the engine), so it can watch a run that is still
being written, or open one copied from another machine.
"""

from benchmax.inspector.app import create_app
from benchmax.inspector.export import export_static
from benchmax.inspector.server import InspectorError, serve

__all__ = ["InspectorError", "create_app", "export_static", "serve"]
