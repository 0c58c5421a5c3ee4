"""A sandbox for untrusted Python: code rewards run test cases here, env tools run snippets."""

from benchmax.sandbox.run import (
    NetworkIsolation,
    SandboxError,
    SandboxResult,
    network_isolation,
    run_python,
    run_python_async,
)

__all__ = [
    "NetworkIsolation",
    "SandboxError",
    "SandboxResult",
    "network_isolation",
    "run_python",
    "run_python_async",
]
