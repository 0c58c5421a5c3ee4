"""The records that cross the sandbox boundary: what to start, what a command did, what a file is."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path, PurePosixPath
from typing import Literal

WORKSPACE = "/workspace"
"""Where the writable, size-capped workspace lives inside every sandbox."""


def _positive(name: str, value: float | None, *, integer: bool = True, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value <= 0:  # type: ignore[arg-type]
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"Limits.{name} must be {kind}{' or None' if allow_none else ''}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Limits:
    """Kernel-enforced limits.

    ``cpu_seconds``, ``memory_mb``, ``file_size_mb`` and ``open_files`` hold for each
    process (rlimits: CPU time, address space, largest file, descriptors); ``processes``
    caps how many processes the sandbox's user may have at once (counted inside the
    sandbox's own user namespace, so a fork bomb stops there); ``disk_mb`` and
    ``tmp_mb`` are the sizes of the workspace and ``/tmp`` filesystems, the only
    writable places. ``None`` leaves a per-process limit off.
    """

    cpu_seconds: int | None = 60
    memory_mb: int | None = 2048
    file_size_mb: int | None = 256
    open_files: int | None = 1024
    processes: int | None = 256
    disk_mb: int = 512
    tmp_mb: int = 256

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_mb", "file_size_mb", "open_files", "processes"):
            _positive(name, getattr(self, name))
        _positive("disk_mb", self.disk_mb, allow_none=False)
        _positive("tmp_mb", self.tmp_mb, allow_none=False)
        if self.memory_mb is not None and self.memory_mb < 32:
            raise ValueError(f"Limits.memory_mb must be at least 32 (an interpreter needs it), got {self.memory_mb}")

    def merged(self, override: Limits | None) -> Limits:
        """These limits with the per-process fields ``override`` sets; sizes stay the sandbox's."""
        if override is None:
            return self
        changes = {f.name: getattr(override, f.name) for f in fields(Limits) if f.name not in ("disk_mb", "tmp_mb")}
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Mount:
    """A host path shown read-only inside the sandbox (at ``target``, default the same path)."""

    source: Path
    target: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", Path(self.source))
        target = self.target if self.target is not None else str(self.source)
        if not PurePosixPath(target).is_absolute():
            raise ValueError(f"Mount target must be an absolute path inside the sandbox, got {target!r}")
        object.__setattr__(self, "target", target)


_MAX_FORWARD_CONNECTIONS = 4096


@dataclass(frozen=True, slots=True)
class PortForward:
    """One host loopback TCP port a network-less sandbox may reach, and nothing else.

    Inside the sandbox, ``127.0.0.1:port`` (the sandbox's own loopback, in its own
    network namespace) accepts connections; each is carried to ``host:host_port`` on
    the host (default: the same port on the host's ``127.0.0.1``). This is how an
    agent program in a sandbox reaches benchmax's model proxy: no other host port,
    no DNS and no outside address become reachable (docs/sandbox.md, "Forwarded
    ports"). ``host`` must be a loopback address. ``port`` must be 1024 or more:
    the sandbox holds no capability to listen below that. ``max_connections`` caps
    the connections open through this forward at once; one past it is closed as
    soon as it is accepted. Local provider only.
    """

    port: int
    host_port: int | None = None
    host: str = "127.0.0.1"
    max_connections: int = 64

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 1024 <= self.port <= 65535:
            raise ValueError(
                f"PortForward.port must be an integer from 1024 to 65535 (the sandbox cannot listen below 1024), "
                f"got {self.port!r}"
            )
        host_port = self.port if self.host_port is None else self.host_port
        if isinstance(host_port, bool) or not isinstance(host_port, int) or not 1 <= host_port <= 65535:
            raise ValueError(f"PortForward.host_port must be an integer from 1 to 65535, got {self.host_port!r}")
        object.__setattr__(self, "host_port", host_port)
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(
                f"PortForward.host must be a loopback address such as '127.0.0.1' or '::1' (a forward opens no "
                f"outside network), got {self.host!r}"
            )
        count = self.max_connections
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= _MAX_FORWARD_CONNECTIONS:
            raise ValueError(
                f"PortForward.max_connections must be an integer from 1 to {_MAX_FORWARD_CONNECTIONS}, got {count!r}"
            )


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """What to start. Every field has a safe default: no network, the limits above.

    ``image`` is a container image (Docker provider). ``rootfs`` is a prepared root
    directory for the local provider (it must hold ``python3`` for the sandbox's
    agent); without one the local provider shows the host's system directories
    (``/usr``, ``/etc``, ...) read-only and nothing else of the host. ``seed`` is a
    host directory copied into the workspace at start. ``python`` is an interpreter
    the sandbox must be able to run (the local provider exposes its installation
    read-only and puts its ``bin`` first on ``PATH``); by default the one running
    benchmax. ``writable_dirs`` are extra writable directories (absolute paths,
    each a fresh filesystem of ``limits.tmp_mb``), for harnesses that expect
    fixed places such as ``/logs``. ``forwards`` are host loopback ports the
    sandbox may reach while it has no network (:class:`PortForward`; local
    provider only).
    """

    image: str | None = None
    rootfs: Path | None = None
    seed: Path | None = None
    network: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    mounts: tuple[Mount, ...] = ()
    python: str | None = None
    workdir: str = WORKSPACE
    writable_dirs: tuple[str, ...] = ()
    forwards: tuple[PortForward, ...] = ()

    def __post_init__(self) -> None:
        if self.rootfs is not None:
            object.__setattr__(self, "rootfs", Path(self.rootfs))
        if self.seed is not None:
            object.__setattr__(self, "seed", Path(self.seed))
        object.__setattr__(self, "mounts", tuple(self.mounts))
        object.__setattr__(self, "env", dict(self.env))
        if not isinstance(self.limits, Limits):
            raise TypeError(f"SandboxSpec.limits must be a benchmax.sandbox.Limits, got {type(self.limits).__name__}")
        for key, value in self.env.items():
            if not isinstance(key, str) or not key or "=" in key or not isinstance(value, str):
                raise ValueError(f"SandboxSpec.env entries must be NAME=str pairs, got {key!r}={value!r}")
        if not PurePosixPath(self.workdir).is_absolute():
            raise ValueError(f"SandboxSpec.workdir must be an absolute path, got {self.workdir!r}")
        object.__setattr__(self, "writable_dirs", tuple(self.writable_dirs))
        reserved = {"/", "/proc", "/dev", "/usr", "/etc", "/tmp", self.workdir}
        for directory in self.writable_dirs:
            pure = PurePosixPath(directory)
            if not pure.is_absolute() or ".." in pure.parts or str(pure) in reserved:
                raise ValueError(
                    f"SandboxSpec.writable_dirs entries must be absolute paths other than {sorted(reserved)}, "
                    f"got {directory!r}"
                )
        object.__setattr__(self, "forwards", tuple(self.forwards))
        for forward in self.forwards:
            if not isinstance(forward, PortForward):
                raise TypeError(
                    f"SandboxSpec.forwards entries must be benchmax.sandbox.PortForward, got {type(forward).__name__}"
                )
        ports = [forward.port for forward in self.forwards]
        if len(set(ports)) != len(ports):
            raise ValueError(f"SandboxSpec.forwards must use each sandbox port once, got ports {ports}")
        if len(ports) > 255:
            raise ValueError(f"SandboxSpec.forwards holds at most 255 ports, got {len(ports)}")
        if self.forwards and self.network:
            raise ValueError(
                "SandboxSpec.forwards apply to a sandbox without network; with network=True it already shares "
                "the host's network, so drop one of the two"
            )


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one command did. ``exit_code`` is negative when a signal ended it (-9: killed)."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    output_truncated: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0 and nothing was cut short."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated


FileType = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of :meth:`Sandbox.list_files`; ``path`` is relative to the listed directory."""

    path: str
    type: FileType
    size: int
    mode: int
