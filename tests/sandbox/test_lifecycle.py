"""Sandbox lifetimes: one per rollout through rollout_context, warm pools, and nothing left behind.

The teardown guarantee is checked on real processes: after a rollout ends
(finished, failed, cancelled), after a pool closes, and after the process that
owns the sandboxes is killed with SIGKILL, no process of any sandbox is alive
and the host's mount table is as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from benchmax.client import RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import BaseEnv, Example, ListDataset, RolloutRequest, ToolError, canonical_example_id
from benchmax.sandbox import RolloutSandboxes, SandboxError, SandboxPool, SandboxSpec
from benchmax.testing import ScriptedServer

SRC = Path(__file__).resolve().parents[2] / "src"
SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a shell command in the sandbox",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}


def sandbox_processes(marker: str | None = None) -> dict[int, str]:
    """Host processes (not zombies) of sandboxes: their environment carries BENCHMAX_SANDBOX_ID.

    A non-dumpable process (the agent) shows its environment to root only: as another
    user it counts through its parent, a process of the same sandbox.
    """
    seen: dict[int, tuple[int, str, str, list[str] | None]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")[:200].decode(errors="replace")
        except OSError:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            ids = [item.split(b"=", 1)[1].decode() for item in environ if item.startswith(b"BENCHMAX_SANDBOX_ID=")]
        except OSError:
            ids = None
        seen[int(entry)] = (int(fields[1]), fields[0], command, ids)

    def ids_of(pid: int, depth: int = 0) -> list[str]:
        parent, _, _, ids = seen.get(pid, (0, "", "", []))
        if ids is None and depth < 8:
            return ids_of(parent, depth + 1)
        return ids or []

    found = {}
    for pid, (_, state, command, _) in seen.items():
        ids = ids_of(pid)
        if ids and state != "Z" and (marker is None or marker in ids):
            found[pid] = command
    return found


def host_mounts() -> list[str]:
    return sorted(
        line.split(" - ")[0].split(" ", 4)[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


async def eventually(check, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


class ShellEnv(BaseEnv):
    """A minimal agentic env: one sandbox per rollout, a ``shell`` tool, a reward from the sandbox."""

    max_turns = 4

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sandboxes = RolloutSandboxes()
        self.seen: dict[str, str] = {}

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        payload = {"prompt_messages": [{"role": "user", "content": "make done.txt"}]}
        return ListDataset([Example(canonical_example_id(payload), payload)])

    @contextlib.asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        async with self.sandboxes.open(rollout_id, files={"task.txt": "make done.txt"}) as sandbox:
            self.seen[rollout_id] = sandbox.id
            yield

    async def list_tools(self):
        return [SHELL]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        try:
            result = await self.sandboxes[rollout_id].exec(tool_args["command"], timeout=60)
        except SandboxError as error:
            raise ToolError(str(error)) from error
        return {"exit_code": result.exit_code, "stdout": result.stdout}

    async def compute_reward(self, rollout):
        listing = await self.sandboxes[rollout.rollout_id].list_files()
        return {"done": float(any(entry.path == "done.txt" for entry in listing))}


def shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def turns(*steps: dict[str, Any]):
    return lambda body: steps[min(sum(m["role"] == "assistant" for m in body["messages"]), len(steps) - 1)]


async def test_each_rollout_gets_its_own_sandbox_that_its_reward_sees_and_that_is_gone_after(bwrap, make_engine):
    env = ShellEnv()
    (example,) = await env.create_dataset("train", Path("."))
    policy = turns(shell("cat task.txt && touch done.txt"), {"content": "done"})
    with ScriptedServer(policy) as server:
        engine = make_engine(env)
        requests = [RolloutRequest(f"r{i}", example, "scripted", server.base_url) for i in range(3)]
        result = await engine.run_group(requests)
    outcomes = result.outcomes
    assert [outcome.rewards for outcome in outcomes] == [{"done": 1.0}] * 3
    assert all(outcome.termination_reason == "finished" for outcome in outcomes)
    assert len(set(env.seen.values())) == 3, "siblings shared a sandbox"
    assert len(env.sandboxes) == 0
    assert await eventually(lambda: not any(sandbox_processes(marker) for marker in env.seen.values()))


async def test_the_sandbox_is_gone_after_a_model_failure_and_after_cancellation(bwrap, make_engine):
    env = ShellEnv()
    (example,) = await env.create_dataset("train", Path("."))
    with ScriptedServer(lambda body: {"status": 500}) as server:
        engine = make_engine(env, EngineConfig(retry=RetryPolicy(max_attempts=1)))
        (failed,) = (await engine.run_group([RolloutRequest("f", example, "scripted", server.base_url)])).outcomes
    assert failed.termination_reason == "model_error"
    with ScriptedServer(turns(shell("touch /tmp/started; sleep 300"))) as server:
        task = asyncio.create_task(
            make_engine(env).run_group([RolloutRequest("c", example, "scripted", server.base_url)])
        )
        assert await eventually(
            # the sandbox is listed while it starts, before the context has recorded its id
            lambda: "c" in env.seen and "sleep 300" in " ".join(sandbox_processes(env.seen["c"]).values())
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert len(env.sandboxes) == 0
    assert await eventually(lambda: not sandbox_processes(env.seen["f"]) and not sandbox_processes(env.seen["c"]))


async def test_a_warm_pool_hands_out_fresh_started_sandboxes_once_each(bwrap):
    async with SandboxPool(bwrap, size=2) as pool:
        assert pool.ready == 2
        async with pool.sandbox() as first:
            await first.write_file("mine.txt", "first")
        async with pool.sandbox() as second:
            assert second.id != first.id
            with pytest.raises(FileNotFoundError):
                await second.read_file("mine.txt")
        assert pool.hits == 2 and pool.misses == 0
        assert await eventually(lambda: pool.ready == 2)
        idle = [sandbox.id for sandbox in pool._ready]
    assert await eventually(lambda: not any(sandbox_processes(marker) for marker in [*idle, first.id, second.id]))


async def test_a_pool_refills_after_every_take_even_when_taken_the_moment_it_fills(bwrap):
    # a finished start lingers in the pool's bookkeeping for one loop turn; a take in that
    # turn must still trigger its replacement, or the pool stays one short for good
    async with SandboxPool(bwrap, size=2) as pool:
        for _ in range(8):
            assert await eventually(lambda: pool.ready == 2, within=30), (pool.ready, pool.failure)
            sandbox = await pool.acquire()
            await sandbox.stop()
        assert pool.misses == 0 and pool.hits == 8


async def test_a_pool_whose_provider_fails_reports_it_and_stops_refilling(tmp_path):
    from benchmax.sandbox import BwrapProvider, SandboxUnavailable

    pool = SandboxPool(BwrapProvider(bwrap=str(tmp_path / "no-bwrap")), size=2)
    with pytest.raises(SandboxUnavailable):
        await pool.fill()
    with pytest.raises(SandboxUnavailable):
        await pool.acquire()
    await pool.aclose()


OWNER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[1])
    from benchmax.sandbox import BwrapProvider, run_python_async, GuardProvider

    async def main():
        provider = BwrapProvider()
        idle = await provider.start()
        busy = await provider.start()
        daemon = await provider.start()
        await daemon.exec("setsid sh -c 'touch /tmp/up; exec sleep 300' >/dev/null 2>&1 </dev/null & "
                          "while [ ! -e /tmp/up ]; do sleep 0.01; done")
        asyncio.create_task(busy.exec("sleep 300", timeout=600))
        sleeper = "import time; time.sleep(300)"
        guarded = asyncio.create_task(run_python_async(sleeper, provider=GuardProvider(), timeout=600))
        print(idle.id, busy.id, daemon.id, flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


async def test_sigkill_of_the_owning_process_leaves_no_sandbox_process_and_no_mount(bwrap, tmp_path):
    mounts_before = host_mounts()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(SRC)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(owner.stdout.readline), 60)
        markers = line.split()
        assert len(markers) == 3, owner.stderr.read() if owner.poll() is not None else line
        assert await eventually(lambda: "sleep 300" in " ".join(sandbox_processes(markers[1]).values()))
        assert "sleep 300" in " ".join(sandbox_processes(markers[2]).values())
        assert await eventually(lambda: _guard_program_running(owner.pid))
        alive = {marker: sorted(sandbox_processes(marker)) for marker in markers}
        assert all(len(pids) >= 3 for pids in alive.values()), alive
        # Freeze one agent: it can no longer notice its host going away, so only the
        # kernel (bubblewrap's parent-death signal and its PID namespace) can end it.
        (agent,) = [pid for pid, command in sandbox_processes(markers[0]).items() if " -S -B -c " in command]
        os.kill(agent, signal.SIGSTOP)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert await eventually(lambda: not any(sandbox_processes(marker) for marker in markers)), {
        marker: sandbox_processes(marker) for marker in markers
    }
    assert await eventually(lambda: not _guard_program_running(owner.pid, orphaned=True))
    assert host_mounts() == mounts_before
    leftovers = [path.name for path in tmp_path.iterdir()]
    assert leftovers == [] or all(name.startswith("benchmax-guard-") for name in leftovers), leftovers


def _guard_program_running(parent: int, orphaned: bool = False) -> bool:
    """Whether the guard's program (a python running _bootstrap.py with a 300 s sleep) is alive."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if b"_bootstrap.py" in command and state[0] != "Z" and (orphaned or int(state[1]) == parent):
            return True
    return False


def test_sandbox_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="workdir"):
        SandboxSpec(workdir="relative")
    with pytest.raises(ValueError, match="NAME=str"):
        SandboxSpec(env={"": "x"})
