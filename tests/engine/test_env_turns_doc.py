"""The example of docs/env-turns.md runs as printed: its env plays a game against a scripted player."""

from __future__ import annotations

import re
from pathlib import Path

from benchmax.envs import Example, RolloutRequest
from benchmax.testing import ScriptedServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "env-turns.md"


async def test_the_documented_guess_env_answers_each_move_and_scores_it(make_engine):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    env = namespace["GuessEnv"]()
    replies = iter(["maybe", "50", "25", "37"])
    payload = {"prompt_messages": [{"role": "user", "content": "guess 1..100"}], "target": 37}
    with ScriptedServer(lambda body: {"content": next(replies)}) as server:
        request = RolloutRequest("r0", Example("e", payload), "scripted", server.base_url)
        (outcome,) = (await make_engine(env).run_group([request])).outcomes
    assert outcome.termination_reason == "finished", outcome.error
    assert [turn.env_info for turn in outcome.turns] == ["no number", "50: lower", "25: higher", "solved"]
    assert [turn.rewards for turn in outcome.turns] == [{"hit": 0.0}] * 3 + [{"hit": 1.0}]
    assert [m["content"] for m in outcome.messages if m["role"] == "user"][1:3] == [
        "Reply with a whole number.",
        "lower",
    ]
    assert outcome.rewards == {"solved": 1.0, "moves": -4 / 8}
