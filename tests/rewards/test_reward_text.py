from benchmax.rewards import (
    content_text,
    extract_answer,
    extract_boxed,
    extract_code_block,
    extract_completion_text,
    extract_tag,
    last_line,
)


def test_completion_text_is_the_final_assistant_message():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    assert extract_completion_text(messages) == "ab"


def test_completion_text_is_empty_when_the_transcript_ends_on_a_tool_result():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "thinking", "tool_calls": [{"id": "c", "function": {"name": "t"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "result"},
    ]
    assert extract_completion_text(messages) == ""
    assert extract_completion_text([]) == ""


def test_content_text_flattens_parts_and_drops_images():
    parts = ["x", {"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "y"}]
    assert content_text(parts) == "xy"
    assert content_text(None) == ""


def test_extract_tag_takes_the_last_block_stripped():
    text = "Format: <answer></answer>. Work... <answer> 42 </answer>"
    assert extract_tag(text) == "42"
    assert extract_tag("no tags here") is None
    assert extract_tag("<final>x</final>", "final") == "x"


def test_extract_tag_spans_lines_and_ignores_case():
    assert extract_tag("<ANSWER>\nline one\nline two\n</Answer>") == "line one\nline two"


def test_extract_boxed_keeps_nested_braces_and_takes_the_last_box():
    text = r"first \boxed{1} then \boxed{\frac{1}{2} + x^{2}}"
    assert extract_boxed(text) == r"\frac{1}{2} + x^{2}"


def test_extract_boxed_handles_escaped_braces_and_ignores_an_unclosed_box():
    assert extract_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"
    assert extract_boxed(r"\boxed{3} and \boxed{4") == "3"
    assert extract_boxed("nothing") is None


def test_last_line_skips_trailing_blank_lines():
    assert last_line("work\n  answer: 7  \n\n  \n") == "answer: 7"
    assert last_line("   ") == ""


def test_extract_answer_tries_strategies_in_order():
    assert extract_answer(r"<answer>A</answer> \boxed{B}") == "A"
    assert extract_answer(r"\boxed{B}" + "\nC") == "B"
    assert extract_answer("reasoning\nC") == "C"
    assert extract_answer("reasoning\nC", order=("tag", "boxed")) == ""


def test_extract_answer_rejects_an_unknown_strategy():
    import pytest

    with pytest.raises(ValueError, match="unknown answer strategy 'regex'"):
        extract_answer("x", order=("regex",))


def test_extract_code_block_takes_the_last_matching_fence():
    text = "```js\nconsole.log(1)\n```\n```python\nprint(1)\n```\n```\nprint(2)\n```"
    assert extract_code_block(text) == "print(2)\n"
    assert extract_code_block(text, "js") == "print(2)\n"
    assert extract_code_block("```py\nx = 1\n```") == "x = 1\n"
    assert extract_code_block("no code") is None


def test_completion_text_is_stripped_and_a_plain_string_is_the_answer():
    # The spec's own MyEnv compares the answer with ==: a reply "42\n" must score.
    assert extract_completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "42\n"}]) == "42"
    assert extract_completion_text("  42 \n") == "42"
    assert extract_completion_text([{"role": "assistant", "content": None, "tool_calls": []}]) == ""
