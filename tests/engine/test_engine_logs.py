"""stdlib logging from env code lands with the rollout (or group) that emitted it."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from contextlib import asynccontextmanager

from benchmax.engine import EngineConfig
from benchmax.envs import BaseEnv, Example, ListDataset, canonical_example_id

log = logging.getLogger("tests.env")


def _log_from_thread(rollout_id: str) -> str:
    time.sleep(random.uniform(0, 0.005))
    log.info("thread %s", rollout_id)
    return "threaded"


class LoggingEnv(BaseEnv):
    """Logs from every hook, from a task it spawns and from a worker thread."""

    max_turns = 3

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return [{"type": "function", "function": {"name": "work", "parameters": {"type": "object"}}}]

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        log.info("enter %s", rollout_id)
        yield
        log.info("exit %s", rollout_id)

    async def run_tool(self, rollout_id, tool_name, **args):
        await asyncio.sleep(random.uniform(0, 0.01))
        log.warning("tool %s", rollout_id)

        async def background() -> None:
            await asyncio.sleep(random.uniform(0, 0.01))
            log.info("task %s", rollout_id)

        await asyncio.create_task(background())
        return await asyncio.to_thread(_log_from_thread, rollout_id)

    async def compute_reward(self, rollout):
        await asyncio.sleep(random.uniform(0, 0.01))
        log.info("reward %s", rollout.rollout_id)
        return {"ok": 1.0}

    async def compute_group_rewards(self, rollouts):
        log.info("group %s", ",".join(rollout.rollout_id for rollout in rollouts))
        return None


STEPS = '[{"tool_calls": [{"name": "work"}]}, {"content": "done"}]'


def example_for(index: int) -> Example:
    payload = {"prompt_messages": [{"role": "user", "content": f"task {index}\n#script: {STEPS}"}]}
    return Example(canonical_example_id(payload), payload)


async def test_logs_from_many_concurrent_rollouts_are_attributed_to_their_own_rollout(make_engine, make_request):
    engine = make_engine(LoggingEnv())
    groups = [[make_request(example=example_for(g), rollout_id=f"g{g}r{r}") for r in range(3)] for g in range(16)]
    results = await asyncio.gather(*(engine.run_group(group) for group in groups))
    for group, result in zip(groups, results, strict=True):
        ids = [request.rollout_id for request in group]
        for outcome in result.outcomes:
            rid = outcome.rollout_id
            mine = [(e.phase, e.message) for e in outcome.logs if e.logger == "tests.env"]
            assert sorted(mine) == sorted(
                [
                    ("context", f"enter {rid}"),
                    ("tools", f"tool {rid}"),
                    ("tools", f"task {rid}"),
                    ("tools", f"thread {rid}"),
                    ("reward", f"reward {rid}"),
                    ("context", f"exit {rid}"),
                ]
            )
        assert [(e.phase, e.message) for e in result.logs] == [("group_reward", f"group {','.join(ids)}")]


async def test_a_log_entry_keeps_level_logger_message_place_time_and_turn(make_engine, make_request):
    engine = make_engine(LoggingEnv())
    before = time.time()
    result = await engine.run_group([make_request(example=example_for(0), rollout_id="one")])
    (outcome,) = result.outcomes
    tool_entry = next(e for e in outcome.logs if e.message == "tool one")
    assert tool_entry.level == "WARNING"
    assert tool_entry.logger == "tests.env"
    assert tool_entry.file == __file__
    assert tool_entry.line > 0
    assert tool_entry.turn == 0
    assert tool_entry.traceback is None
    assert before <= tool_entry.time <= time.time()
    reward_entry = next(e for e in outcome.logs if e.message == "reward one")
    assert reward_entry.turn == 1
    assert outcome.started_at <= tool_entry.time <= reward_entry.time <= outcome.ended_at


async def test_logs_outside_any_rollout_are_not_captured(make_engine, make_request):
    engine = make_engine(LoggingEnv())
    log.warning("before the run")
    result = await engine.run_group([make_request(example=example_for(1), rollout_id="x")])
    log.warning("after the run")
    messages = [e.message for o in result.outcomes for e in o.logs] + [e.message for e in result.logs]
    assert "before the run" not in messages and "after the run" not in messages
    assert "reward x" in messages


async def test_an_exception_log_keeps_its_traceback(make_engine, make_request):
    class Raises(LoggingEnv):
        async def compute_reward(self, rollout):
            try:
                {}["missing"]
            except KeyError:
                log.exception("lookup failed")
            return {"ok": 0.0}

    engine = make_engine(Raises())
    result = await engine.run_group([make_request([{"content": "x"}])])
    (entry,) = [e for e in result.outcomes[0].logs if e.message == "lookup failed"]
    assert entry.level == "ERROR"
    assert "KeyError: 'missing'" in entry.traceback


async def test_a_chatty_rollout_keeps_a_bounded_number_of_records(make_engine, make_request):
    class Chatty(LoggingEnv):
        async def compute_reward(self, rollout):
            for index in range(50):
                log.info("line %d", index)
            return {"ok": 1.0}

    engine = make_engine(Chatty(), EngineConfig(max_log_records=10))
    result = await engine.run_group([make_request([{"content": "x"}], rollout_id="c")])
    entries = result.outcomes[0].logs
    assert len(entries) == 11
    assert entries[-1].message == "42 more log records were dropped (limit 10)"


async def test_info_records_are_captured_even_when_the_root_logger_is_at_warning(make_engine, make_request):
    root = logging.getLogger()
    previous = root.level
    root.setLevel(logging.WARNING)
    try:
        engine = make_engine(LoggingEnv())
        result = await engine.run_group([make_request(example=example_for(2), rollout_id="w")])
    finally:
        root.setLevel(previous)
    assert "reward w" in [e.message for e in result.outcomes[0].logs]
