"""Rendering the prompt once and appending only new messages as a suffix."""

from __future__ import annotations

import orjson
import pytest

from benchmax.train._tokens import (
    TemplateError,
    parse_tool_call_text,
    render_prompt,
    render_suffix,
    render_text,
    template_renders_tools,
    tool_call_text,
)
from benchmax.train.tiny import CHAT_TEMPLATE as TINY_TEMPLATE


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


CALCULATOR = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "Multiply two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
        },
    }
]


def test_a_template_that_ignores_tools_gets_them_written_into_the_system_turn(tiny):
    _, tokenizer = tiny  # SmolLM2's template: content only, no tools
    assert not template_renders_tools(tokenizer)
    messages = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "What is 3 times 4?"}]
    text = render_text(tokenizer, messages, CALCULATOR, add_generation_prompt=True)
    assert render_prompt(tokenizer, messages, CALCULATOR) == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert "multiply(a: number, b: number): Multiply two numbers." in text
    assert "<tool_call>" in text
    assert text.index("Use the tools.") < text.index("multiply(") < text.index("What is 3 times 4?")
    # a worked example's call is rendered as the text the policy parses back
    shot = [
        *messages,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "multiply", "arguments": '{"a": 3}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "12"},
    ]
    rendered = render_text(tokenizer, shot, CALCULATOR, add_generation_prompt=True)
    call = tool_call_text(shot[2]["tool_calls"][0])
    assert call == '<tool_call>{"name": "multiply", "arguments": {"a": 3}}</tool_call>'
    assert parse_tool_call_text(call)[1][0]["function"]["name"] == "multiply"
    assert f"<|im_start|>assistant\n{call}<|im_end|>" in rendered.split("What is 3 times 4?")[1]
    # suffixes stay exact: the history renders the same with the tool block as it did before
    suffix = render_suffix(tokenizer, shot[:3], shot[3:], CALCULATOR)
    assert tokenizer.convert_ids_to_tokens(suffix)[-2:] == ["<|im_start|>", "assistant"]


def test_a_template_that_renders_tools_itself_is_left_alone(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = TINY_TEMPLATE
    assert template_renders_tools(tokenizer)
    text = render_text(tokenizer, [{"role": "user", "content": "two"}], CALCULATOR, add_generation_prompt=True)
    assert "You can call these tools" not in text
    assert '"name": "multiply"' in text


def test_a_block_holding_a_list_of_calls_gives_each_call():
    content, calls = parse_tool_call_text(
        '<tool_call>[{"name": "add", "arguments": {"a": 1}}, {"name": "multiply", "arguments": {"b": 2}}]</tool_call>'
    )
    assert content == ""
    assert [call["function"]["name"] for call in calls] == ["add", "multiply"]
    assert [call["id"] for call in calls] == ["call_0", "call_1"]
