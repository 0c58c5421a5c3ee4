"""``benchmax serve``: an env over HTTP, for a remote ``benchmax eval`` or an OpenEnv client.

The server holds the env's code, data and per-rollout resources; the client
runs the model loop (:class:`benchmax.remote.RemoteEnv` is benchmax's own
client). One session per rollout: made for an example (the env's
``rollout_context`` entered), tool calls in it, the finished transcript scored,
torn down on every way out: by the client, when its WebSocket drops, idle past
its TTL, or when the server stops. ``docs/serve.md`` is the protocol.
"""

from benchmax.serve._app import create_app
from benchmax.serve._server import DEFAULT_HOST, DEFAULT_PORT, ServeError, load_served, serve
from benchmax.serve._service import EnvService, ServeConfig, default_max_sessions

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "EnvService",
    "ServeConfig",
    "ServeError",
    "create_app",
    "default_max_sessions",
    "load_served",
    "serve",
]
