"""A served env whose hook runs an Engine: the inner rollouts' records stay with the inner rollouts.

``benchmax serve`` gathers what a call logs and the engine captures what a rollout
logs, through one capture; the innermost capture gets each record, so the inner
rollout's records land in its outcome (as they do when a local engine runs the
same env) and the served call's gathering keeps only what the hook itself logged.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager

from benchmax.engine import Engine
from benchmax.envs import BaseEnv, Example, ListDataset, RolloutRequest, canonical_example_id, install_log_capture
from benchmax.serve._capture import Gathering, gathering
from benchmax.testing import ScriptedServer

log = logging.getLogger("tests.nested")


class InnerEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def list_tools(self):
        return []

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        log.info("inner context %s", rollout_id)
        yield

    async def compute_reward(self, rollout):
        await asyncio.to_thread(log.info, "inner reward %s", rollout.rollout_id)
        return {"ok": 1.0}


async def test_a_hook_that_runs_an_engine_inside_a_served_call_keeps_inner_records_in_the_inner_rollout():
    install_log_capture()
    payload = {"prompt_messages": [{"role": "user", "content": "hi"}]}
    with ScriptedServer() as model:
        request = RolloutRequest(
            rollout_id="inner-0",
            example=Example(canonical_example_id(payload), payload),
            model="scripted",
            base_url=model.base_url,
        )
        engine = Engine(InnerEnv())
        try:
            with gathering(Gathering("served-0")) as call:
                log.info("hook starts")
                result = await engine.run_group([request])
                log.info("hook ends")
        finally:
            await engine.aclose()
    outcome = result.outcomes[0]
    assert outcome.termination_reason == "finished", outcome.error
    inner = [entry.message for entry in outcome.logs if entry.logger == "tests.nested"]
    assert inner == ["inner context inner-0", "inner reward inner-0"]
    served = [entry for entry in call.take() if entry.get("logger") == "tests.nested"]
    assert [entry.get("message") for entry in served] == ["hook starts", "hook ends"]
    assert {entry.get("rollout_id") for entry in served} == {"served-0"}
