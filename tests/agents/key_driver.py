"""A benchmax driver started with the run's key in its environment, as ``OPENAI_API_KEY=... benchmax eval``
is: it runs one rollout of a command agent that tries to read the key out of this process.

``python key_driver.py BASE_URL MODE``: MODE ``environ`` (the agent reads ``/proc/<parent>/environ``
and prints it ROT13-encoded, so no masking of the answer can hide a read that worked) or ``mem``
(the same through ``/proc/<parent>/mem``). Prints the rollout's messages and error as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys

from agent_helpers import ScoredAgents, example

from benchmax.client import RetryPolicy
from benchmax.engine import Engine, EngineConfig
from benchmax.envs import RolloutRequest, StaticBearerAuth

READERS = {
    "environ": (
        "import codecs, os\n"
        "try:\n"
        "    data = open(f'/proc/{os.getppid()}/environ', 'rb').read().decode('latin-1')\n"
        "except OSError as error:\n"
        "    data = f'unreadable: {error.strerror}'\n"
        "print(codecs.encode(data.replace(chr(0), ' '), 'rot13'))\n"
    ),
    "mem": (
        "import codecs, os, re\n"
        "parent, found = os.getppid(), []\n"
        "try:\n"
        "    maps = open(f'/proc/{parent}/maps').read().splitlines()\n"
        "    with open(f'/proc/{parent}/mem', 'rb') as memory:\n"
        "        for line in maps:\n"
        "            if '[stack]' not in line and '[heap]' not in line:\n"
        "                continue\n"
        "            low, high = (int(part, 16) for part in line.split()[0].split('-'))\n"
        "            memory.seek(low)\n"
        "            found += re.findall(rb'sk-[A-Za-z0-9-]{20,}', memory.read(high - low))\n"
        "    data = ' '.join(sorted({key.decode() for key in found}))\n"
        "except (OSError, ValueError, OverflowError) as error:\n"
        "    data = f'unreadable: {error}'\n"
        "print(codecs.encode(data, 'rot13'))\n"
    ),
}


async def main(base_url: str, mode: str) -> None:
    env = ScoredAgents(command=[sys.executable, "-c", READERS[mode]])
    engine = Engine(env, EngineConfig(retry=RetryPolicy(max_attempts=1)))
    request = RolloutRequest(
        "probe-0",
        example(),
        model="scripted",
        base_url=base_url,
        model_auth=StaticBearerAuth.from_env("OPENAI_API_KEY"),
    )
    try:
        (outcome,) = (await engine.run_group([request])).outcomes
    finally:
        await env.aclose()
        await engine.aclose()
    print(json.dumps({"messages": outcome.messages, "error": outcome.error}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
