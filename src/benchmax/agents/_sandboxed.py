"""An agent command in a bubblewrap sandbox whose one way out is the recording proxy.

The sandbox keeps its own empty network namespace; the proxy's port is the one
host endpoint it reaches, through the sandbox facility's forwarded ports
(``SandboxSpec.forwards``, docs/sandbox.md "Forwarded ports"): inside, the
lease's ``http://127.0.0.1:<proxy port>/r/<slot>/v1`` works unchanged, and no
other host port, outside address or DNS does. The proxy's per-rollout slot and
key decide which lease a call may use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from benchmax.agents._run import AgentRun, command_ended, log_line, program_file
from benchmax.envs import RolloutFailure, TerminationReason
from benchmax.proxy import ProxyLease
from benchmax.sandbox import BwrapProvider, PortForward, SandboxError, SandboxSpec


def sandbox_spec(sandbox: Any, lease: ProxyLease) -> tuple[SandboxSpec, str]:
    """The author's spec (or the default one), without network, with the lease's proxy port forwarded;
    and the lease's base URL as seen inside (a forward listens on the sandbox's own 127.0.0.1)."""
    spec = sandbox if isinstance(sandbox, SandboxSpec) else SandboxSpec()
    if spec.network:
        raise RolloutFailure(
            TerminationReason.SANDBOX_ERROR,
            "an agent's sandbox must not have network=True: its only way out is the recording proxy",
        )
    parts = urlsplit(lease.base_url)
    try:
        proxy = PortForward(parts.port or 80, host=parts.hostname or "127.0.0.1")
        spec = replace(spec, forwards=(*spec.forwards, proxy))
    except ValueError as exc:
        raise RolloutFailure(
            TerminationReason.SANDBOX_ERROR, f"the agent's sandbox cannot forward the proxy's port: {exc}"
        ) from exc
    return spec, f"http://127.0.0.1:{proxy.port}{parts.path}"


async def run_in_sandbox(
    sandbox: Any,
    argv: Sequence[str],
    stdin: bytes,
    lease: ProxyLease,
    extra_env: Mapping[str, str],
    *,
    timeout: float,
    max_answer: int,
    max_stderr: int,
    secrets: Sequence[str] = (),
) -> AgentRun:
    """Run ``argv`` in a fresh sandbox that reaches only the proxy; stdout is the answer, stderr lines are
    logged; ``secrets`` (the run's model key) are masked in both."""
    spec, base_url = sandbox_spec(sandbox, lease)
    env = {
        **extra_env,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": lease.api_key,
        "BENCHMAX_ROLLOUT_ID": lease.rollout_id,
    }
    try:
        async with BwrapProvider().sandbox(spec) as box:
            result = await box.exec(
                list(argv), env=env, timeout=timeout, stdin=stdin, max_output_bytes=max(max_answer * 4, max_stderr * 4)
            )
    except SandboxError as exc:
        raise RolloutFailure(TerminationReason.SANDBOX_ERROR, f"the agent's sandbox failed: {exc}") from exc
    for line in result.stderr.splitlines():  # read once the sandbox is done: all after the last turn
        log_line(line.encode("utf-8", "replace"), program_file(argv), secrets)
    return command_ended(
        result.stdout,
        result.stderr[-max_stderr:],
        result.exit_code,
        timed_out=result.timed_out,
        timeout=timeout,
        max_answer=max_answer,
        where=" in its sandbox",
    ).masked(secrets)
