"""An Inspect model provider for the scripted server: ``model="scripted/NAME"``, ``model_base_url=URL``.

Inspect's own OpenAI provider needs openai>=3.4, which cannot sit beside verifiers 0.4 (it pins
openai<3) in one environment; this provider sends Inspect's messages as OpenAI chat messages over
httpx instead, so ``inspect_ai.eval`` is the runner on one side of the comparison.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, modelapi


def openai_message(message: ChatMessage) -> dict[str, Any]:
    content = message.content
    if not isinstance(content, str):
        content = [{"type": "text", "text": part.text} for part in content if part.type == "text"]
    return {"role": message.role, "content": content}


class ScriptedAPI(ModelAPI):
    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        **model_args: Any,
    ) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, api_key_vars=[], config=config)
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def max_connections(self) -> int:
        return 64

    async def generate(self, input: list[ChatMessage], tools: Any, tool_choice: Any, config: GenerateConfig) -> Any:
        body: dict[str, Any] = {"model": self.model_name, "messages": [openai_message(m) for m in input]}
        if config.max_tokens is not None:
            body["max_tokens"] = config.max_tokens
        if self._client is None or self._loop is not asyncio.get_running_loop():
            # One connection pool per eval (Inspect may keep the model object from one eval to the next).
            self._client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64))
            self._loop = asyncio.get_running_loop()
        reply = await self._client.post(f"{self.base_url}/chat/completions", json=body)
        reply.raise_for_status()
        choice = reply.json()["choices"][0]
        stop = "max_tokens" if choice.get("finish_reason") == "length" else "stop"
        return ModelOutput.from_content(self.model_name, choice["message"].get("content") or "", stop_reason=stop)


@modelapi(name="scripted")
def scripted() -> type[ModelAPI]:
    return ScriptedAPI
