"""Which provider runs sandboxes when the caller names none: ``BENCHMAX_SANDBOX``.

``bwrap`` (the default) is the local boundary. ``docker`` uses a Docker-compatible
daemon (``BENCHMAX_SANDBOX_IMAGE`` names the image, default ``python:3.12-slim``).
``guard`` is the weaker fallback for Python snippets only, and is never chosen
unless named: without bubblewrap the default fails with the install command.
"""

from __future__ import annotations

import os
import threading

from benchmax.sandbox._base import SandboxProvider
from benchmax.sandbox._errors import SandboxUnavailable

KINDS = ("bwrap", "docker", "guard")
DEFAULT_DOCKER_IMAGE = "python:3.12-slim"

_providers: dict[tuple[str, str], SandboxProvider] = {}
_lock = threading.Lock()


def sandbox_kind() -> str:
    """The provider ``BENCHMAX_SANDBOX`` asks for (``bwrap`` when unset)."""
    kind = os.environ.get("BENCHMAX_SANDBOX", "").strip().lower() or "bwrap"
    if kind not in KINDS:
        raise SandboxUnavailable(f"BENCHMAX_SANDBOX={kind!r} is not a sandbox provider; use one of {', '.join(KINDS)}")
    return kind


def default_provider() -> SandboxProvider:
    """The shared provider for :func:`sandbox_kind`, checked once (raises with the fix if it cannot run)."""
    kind = sandbox_kind()
    image = os.environ.get("BENCHMAX_SANDBOX_IMAGE", DEFAULT_DOCKER_IMAGE) if kind == "docker" else ""
    with _lock:
        provider = _providers.get((kind, image))
        if provider is None:
            if kind == "bwrap":
                from benchmax.sandbox._bwrap import BwrapProvider

                provider = BwrapProvider()
            elif kind == "docker":
                from benchmax.sandbox._docker import DockerProvider

                provider = DockerProvider(image=image)
            else:
                from benchmax.sandbox._guard import GuardProvider

                provider = GuardProvider()
            _providers[(kind, image)] = provider
    provider.check()
    return provider
