"""A Harbor environment on benchmax's local sandbox: Harbor tasks with no daemon and no cloud account.

Select it with ``EnvironmentConfig(import_path=LOCAL_SANDBOX)``. Each trial gets
one bubblewrap sandbox (``benchmax.sandbox``): the host's system directories
read-only, nothing else of the host, size-capped writable ``/logs``, ``/tests``,
``/solution`` and the task's working directory, and teardown that survives even
a killed benchmax. There is no network: Harbor's "public" network mode would
mean the host's own network namespace here (its loopback services included),
so it takes ``EnvironmentConfig(import_path=LOCAL_SANDBOX, kwargs={"network": True})``
to give a task that; a task that asks for no network never gets it.

It does not build the task's ``environment/Dockerfile``: commands see the
host's installed system. Tasks that need their image's packages belong on a
container provider (``EnvironmentType.DOCKER``, a cloud one), which HarborEnv
passes through to Harbor unchanged. Harbor's ``user="root"`` requests run as
the sandbox's unprivileged user.
"""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode

from benchmax.sandbox import BwrapProvider, Limits, Sandbox, SandboxError, SandboxSpec

logger = logging.getLogger(__name__)

_HARBOR_DIRS = ("/logs", "/tests", "/solution", "/runtime")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)
_DEFAULT_WORKDIR = "/app"
_provider: BwrapProvider | None = None


def _local_provider() -> BwrapProvider:
    global _provider
    if _provider is None:
        _provider = BwrapProvider()
    return _provider


class LocalSandboxEnvironment(BaseEnvironment):
    """Harbor's environment interface over one local bubblewrap sandbox per trial."""

    def __init__(self, *args: Any, network: bool = False, **kwargs: Any) -> None:
        self._sandbox: Sandbox | None = None
        self._network = bool(network)
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "benchmax-local"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        """Nothing to build: the sandbox shows the host's system, so no definition is required."""

    def _workdir(self) -> str:
        """The task's working directory: its config's, else the Dockerfile's last WORKDIR, else /app."""
        if self.task_env_config.workdir:
            return self.task_env_config.workdir
        dockerfile = Path(self.environment_dir) / "Dockerfile"
        if dockerfile.is_file():
            found = _WORKDIR.findall(dockerfile.read_text(encoding="utf-8", errors="replace"))
            if found and PurePosixPath(found[-1]).is_absolute():
                return found[-1]
        return _DEFAULT_WORKDIR

    def _spec(self) -> SandboxSpec:
        mode = self._network_policy.network_mode
        if mode == NetworkMode.ALLOWLIST:
            raise ValueError(
                "the benchmax local sandbox has no network allowlists: a task gets no network or the host's; "
                "use a container provider for allowlisted egress"
            )
        if mode == NetworkMode.PUBLIC and not self._network:
            self.logger.debug(
                "benchmax local sandbox: no network (EnvironmentConfig(kwargs={'network': True}) shares the host's)"
            )
        memory = self._override_memory_mb or self.task_env_config.memory_mb
        storage = self._override_storage_mb or self.task_env_config.storage_mb
        limits = Limits(
            cpu_seconds=None,
            memory_mb=max(int(memory), 64) if memory else 4096,
            processes=512,
            disk_mb=max(int(storage), 16) if storage else 1024,
            tmp_mb=512,
        )
        workdir = self._workdir()
        return SandboxSpec(
            network=self._network and mode == NetworkMode.PUBLIC,
            limits=limits,
            workdir=workdir,
            writable_dirs=tuple(d for d in _HARBOR_DIRS if d != workdir),
            env=dict(self._persistent_env),
        )

    async def start(self, force_build: bool) -> None:
        if (Path(self.environment_dir) / "Dockerfile").is_file():
            self.logger.info(
                "benchmax local sandbox: %s/Dockerfile is not built; commands run on the host's system, read-only",
                self.environment_dir,
            )
        try:
            self._sandbox = await _local_provider().start(self._spec())
        except SandboxError as exc:
            raise RuntimeError(f"the benchmax local sandbox could not start: {exc}") from exc
        await self.ensure_dirs(self._mount_targets(writable_only=True))
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        if self._sandbox is not None:
            await self._sandbox.stop()

    def _running(self) -> Sandbox:
        if self._sandbox is None or self._sandbox.stopped:
            raise RuntimeError("the benchmax local sandbox is not running (start() it first)")
        return self._sandbox

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        sandbox = self._running()
        merged = {**self._persistent_env, **(env or {})}
        result = await sandbox.exec(
            command,
            cwd=cwd or sandbox.workspace,
            env=merged,
            timeout=float(timeout_sec) if timeout_sec else 3600.0,
            max_output_bytes=16 << 20,
        )
        stderr = result.stderr
        if result.timed_out:
            stderr += f"\n[benchmax sandbox: the command ran past {timeout_sec} s and was killed]"
        return ExecResult(stdout=result.stdout, stderr=stderr, return_code=result.exit_code)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._running().copy_in(source_path, target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._running().copy_in(source_dir, target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self._running().copy_out(source_path, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        sandbox = self._running()
        probe = await sandbox.exec(f"test -d {shlex.quote(source_dir)}", timeout=30)
        if probe.exit_code != 0:
            Path(target_dir).mkdir(parents=True, exist_ok=True)
            return
        await sandbox.copy_out(source_dir, target_dir)
