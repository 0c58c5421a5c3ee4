"""A minimal model-driven Harbor agent for the tests: the model proposes shell commands, the agent runs them.

It talks to the rollout's OpenAI-compatible endpoint (``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` from its env) from the host process, runs each ``shell`` tool
call with ``environment.exec`` and stops at the first answer without a tool
call. It records what it saw in ``SEEN`` so tests can check the wiring.
"""

import asyncio
import json
import os
import urllib.request

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a shell command in the task's environment",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}
SEEN = []


def _post(request: urllib.request.Request) -> dict:
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


RUNNING = [0, 0]  # now, most at once


class ShellAgent(BaseAgent):
    @staticmethod
    def name() -> str:
        return "benchmax-test-shell"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        pass

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        RUNNING[0] += 1
        RUNNING[1] = max(RUNNING)
        try:
            await self._loop(instruction, environment)
        finally:
            RUNNING[0] -= 1

    async def _loop(self, instruction: str, environment: BaseEnvironment) -> None:
        base_url = self._extra_env["OPENAI_BASE_URL"].rstrip("/")
        model = (self.model_name or "").removeprefix("openai/")
        SEEN.append(
            {
                "model": self.model_name,
                "base_url": base_url,
                "api_key": self._extra_env.get("OPENAI_API_KEY"),
                "host_env": {k: v for k, v in os.environ.items() if k.startswith("BENCHMAX_TEST_")},
            }
        )
        messages = [{"role": "user", "content": instruction}]
        for _ in range(8):
            body = json.dumps({"model": model, "messages": messages, "tools": [SHELL]}).encode()
            request = urllib.request.Request(
                f"{base_url}/chat/completions",
                data=body,
                headers={
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {self._extra_env['OPENAI_API_KEY']}",
                },
            )
            reply = await asyncio.to_thread(_post, request)
            message = reply["choices"][0]["message"]
            calls = message.get("tool_calls") or []
            messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
            if not calls:
                return
            for call in calls:
                command = json.loads(call["function"]["arguments"])["command"]
                result = await environment.exec(command, timeout_sec=30)
                output = json.dumps({"exit_code": result.return_code, "stdout": result.stdout, "stderr": result.stderr})
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
