"""The embedded model's prompt carries tool calls and results as raw text, not HTML.

These run the server's real chat handler (llama-cpp-python's ``chatml-function-calling``
behind benchmax's ``_openai_tool_calling``) up to the prompt it hands to llama.cpp:
the stand-in for ``Llama`` records each prompt and answers as the model would,
so no weights are loaded. CI installs the ``local`` extra; without it these fail
with the install command, as the other embedded-model tests do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmax.local import EmbeddedModelError, check_installed

TRICKY = 'say "hi" & <b>bold</b> é 日本'
ARGUMENTS = json.dumps({"text": TRICKY}, ensure_ascii=False)
RESULT = 'echoed: "hi" & <b>bold</b> é 日本'
ECHO = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Echo <text> & return it, e.g. 'é'",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "any text: <, >, & or 日本"}},
            "required": ["text"],
        },
    },
}
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You use tools & say <why>."},
    {"role": "user", "content": f"Echo this: {TRICKY}"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": ARGUMENTS}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
]
ESCAPES = ("&#34;", "&#39;", "&amp;", "&lt;", "&gt;", "&quot;", "\\u003c", "\\u003e", "\\u0026", "\\u00e9")


class _RecordingLlama:
    """Stands in for ``llama_cpp.Llama``: records prompts, answers the handler's completions in order."""

    verbose = False
    input_ids: list[int] = []  # the KV cache holds nothing: the server logs each prompt as new
    n_tokens = 0

    def __init__(self, answers: list[str]) -> None:
        self.prompts: list[str] = []
        self._answers = answers

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text)

    def token_bos(self) -> int:
        return 1

    def create_completion(self, *, prompt: str, **options: Any) -> dict[str, Any]:
        self.prompts.append(prompt)
        text = self._answers[len(self.prompts) - 1] if len(self.prompts) <= len(self._answers) else ""
        return {
            "id": f"cmpl-{len(self.prompts)}",
            "object": "text_completion",
            "created": 0,
            "model": "stand-in",
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


@pytest.fixture(autouse=True)
def _local_extra() -> None:
    try:
        check_installed()
    except EmbeddedModelError as error:
        pytest.fail(f"the 'local' extra is required for these tests: {error}", pytrace=False)


# The handler renders its template at three places: no tool choice, a forced tool, "auto".
CASES = {
    "no tools": ({}, ["the answer"]),
    "forced tool": ({"tools": [ECHO], "tool_choice": {"type": "function", "function": {"name": "echo"}}}, [ARGUMENTS]),
    "auto": ({"tools": [ECHO], "tool_choice": "auto"}, ["functions.echo", ARGUMENTS, ""]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_prompt_holds_arguments_and_results_as_the_raw_characters(case: str) -> None:
    from benchmax.local._serve import _openai_tool_calling

    options, answers = CASES[case]
    llama = _RecordingLlama(answers)
    reply = _openai_tool_calling(llama, default_max_tokens=16, messages=json.loads(json.dumps(CONVERSATION)), **options)

    prompt = llama.prompts[0]
    for escape in ESCAPES:
        assert escape not in prompt, f"{escape!r} in the prompt:\n{prompt}"
    assert "You use tools & say <why>." in prompt
    assert f"Echo this: {TRICKY}" in prompt
    assert f"functions.echo:\n{ARGUMENTS}<|im_end|>" in prompt
    assert f"functions.echo returned:\n{RESULT}<|im_end|>" in prompt
    if options:
        assert '"description": "any text: <, >, & or 日本"' in prompt
        call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == {"text": TRICKY}


def test_a_later_turn_sees_the_model_s_own_arguments_verbatim() -> None:
    """The round trip: arguments the model wrote come back in the next prompt byte for byte."""
    from benchmax.local._serve import _openai_tool_calling

    forced = {"type": "function", "function": {"name": "echo"}}
    first = _RecordingLlama([ARGUMENTS])
    reply = _openai_tool_calling(
        first, default_max_tokens=16, messages=CONVERSATION[:2], tools=[ECHO], tool_choice=forced
    )
    message = reply["choices"][0]["message"]
    follow_up = [*CONVERSATION[:2], {"role": "assistant", "content": None, "tool_calls": message["tool_calls"]}]
    follow_up.append({"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": RESULT})

    second = _RecordingLlama([ARGUMENTS])
    _openai_tool_calling(second, default_max_tokens=16, messages=follow_up, tools=[ECHO], tool_choice=forced)

    assert f"functions.echo:\n{message['tool_calls'][0]['function']['arguments']}<|im_end|>" in second.prompts[0]
    assert f"functions.echo:\n{ARGUMENTS}<|im_end|>" in second.prompts[0]
    assert "&#34;" not in second.prompts[0]
