"""Rendering the prompt once and appending only new messages as a suffix."""

from __future__ import annotations

import orjson
import pytest

from benchmax.train._tokens import TemplateError, parse_tool_call_text, render_prompt, render_suffix


def test_suffix_holds_only_the_new_messages_and_the_next_generation_prompt(tiny):
    _, tokenizer = tiny
    prompt = [{"role": "user", "content": "what is two plus three"}]
    history = [*prompt, {"role": "assistant", "content": "add"}]
    new = [{"role": "tool", "content": "result five"}]
    suffix = render_suffix(tokenizer, history, new, None)
    assert tokenizer.convert_ids_to_tokens(suffix) == [
        "<|im_start|>", "tool", "result", "five", "<|im_end|>", "<|im_start|>", "assistant",
    ]
    assert render_prompt(tokenizer, prompt, None)[-2:] == tokenizer.convert_tokens_to_ids(
        ["<|im_start|>", "assistant"]
    )


def test_a_template_that_rewrites_history_is_refused_with_a_clear_error(tiny):
    _, tokenizer = tiny
    tokenizer = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer, eos_token="<|im_end|>")
    tokenizer.chat_template = (
        "{% for m in messages %}{% if loop.last %}{{ m['content'] }}{% else %}{{ m['role'] }}{% endif %}"
        "{% endfor %}"
    )
    history = [{"role": "user", "content": "two"}, {"role": "assistant", "content": "add"}]
    with pytest.raises(TemplateError, match="renders the history differently"):
        render_suffix(tokenizer, history, [{"role": "tool", "content": "five"}], None)


def test_hermes_tool_calls_are_parsed_and_malformed_ones_kept_for_an_error_reply():
    text = 'sure <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call> <tool_call>oops</tool_call>'
    content, calls = parse_tool_call_text(text)
    assert content == "sure"
    assert calls[0]["function"]["name"] == "add"
    assert orjson.loads(calls[0]["function"]["arguments"]) == {"a": 1}
    assert calls[1]["function"] == {"name": "", "arguments": "oops"}
    assert parse_tool_call_text("plain answer") == ("plain answer", [])
