"""Sandboxes for model-written code and shell-using agents.

One interface (:class:`Sandbox`: ``exec``, files, tar copies, ``stop``) over
providers: :class:`BwrapProvider`, the local boundary (bubblewrap: namespaces,
a read-only system, size-capped writable dirs, seccomp, rlimits, no network but
the host loopback ports a spec forwards: :class:`PortForward`),
:class:`DockerProvider` (any Docker-compatible daemon, through the ``docker``
SDK), and :class:`GuardProvider`, a weaker opt-in fallback for Python snippets
only. :class:`RolloutSandboxes` ties one sandbox to each rollout's
``rollout_context``; :class:`SandboxPool` keeps fresh ones warm.
:func:`run_python` runs a program in a sandbox (a fresh one by default). See
docs/sandbox.md.
"""

from benchmax.sandbox._base import Sandbox, SandboxProvider
from benchmax.sandbox._bwrap import BwrapProvider
from benchmax.sandbox._bwrap_host import find_bwrap
from benchmax.sandbox._bwrap_sandbox import BwrapSandbox
from benchmax.sandbox._default import default_provider, sandbox_kind
from benchmax.sandbox._docker import DockerProvider, DockerSandbox
from benchmax.sandbox._errors import SandboxEnded, SandboxError, SandboxUnavailable
from benchmax.sandbox._guard import GuardProvider, GuardSandbox
from benchmax.sandbox._pool import SandboxPool
from benchmax.sandbox._python import SandboxResult, run_python, run_python_async
from benchmax.sandbox._rollouts import RolloutSandboxes
from benchmax.sandbox._spec import WORKSPACE, ExecResult, FileInfo, Limits, Mount, PortForward, SandboxSpec

__all__ = [
    "WORKSPACE",
    "BwrapProvider",
    "BwrapSandbox",
    "DockerProvider",
    "DockerSandbox",
    "ExecResult",
    "FileInfo",
    "GuardProvider",
    "GuardSandbox",
    "Limits",
    "Mount",
    "PortForward",
    "RolloutSandboxes",
    "Sandbox",
    "SandboxEnded",
    "SandboxError",
    "SandboxPool",
    "SandboxProvider",
    "SandboxResult",
    "SandboxSpec",
    "SandboxUnavailable",
    "default_provider",
    "find_bwrap",
    "run_python",
    "run_python_async",
    "sandbox_kind",
]
