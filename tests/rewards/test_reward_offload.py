import asyncio
import logging
import os
import threading

from benchmax.engine._logs import LogSink
from benchmax.envs import capture_logs, install_log_capture
from benchmax.rewards import run_in_process, run_sync


def _busy_sum(n):
    return sum(i * i for i in range(n))


async def test_run_sync_runs_in_another_thread_and_keeps_log_attribution():
    install_log_capture()
    sink = LogSink()

    def work():
        logging.getLogger("benchmax.test").info("scored in %s", threading.current_thread().name)
        return threading.get_ident()

    with capture_logs(sink):
        ident = await run_sync(work)
    assert ident != threading.get_ident()
    assert [entry.message.startswith("scored in benchmax-reward") for entry in sink.entries] == [True]


async def test_run_sync_does_not_stall_the_event_loop(loop_ticks):
    async with loop_ticks(0.005) as ticks:
        await run_sync(threading.Event().wait, 0.2)
    assert ticks.count >= 10


async def test_run_in_process_runs_in_another_process():
    pid, total = await asyncio.gather(run_in_process(os.getpid), run_in_process(_busy_sum, 1000))
    assert pid != os.getpid()
    assert total == _busy_sum(1000)
