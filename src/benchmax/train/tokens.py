"""Token-faithful chat rendering: the prompt once, then only the new messages.

A trainer must see exactly the tokens the policy generated. Re-rendering the
whole chat each turn breaks that: templates rewrite history (Qwen3-style ones
drop empty think blocks, some re-space tool calls), so the ids of earlier turns
change under the model. Here the first turn is rendered with the chat template;
every later turn appends the previous completion's ids as generated plus a
suffix for the new messages (tool results) only.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


class TemplateError(ValueError):
    """The chat template cannot render the new messages as a suffix of the history."""


def render_prompt(tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[int]:
    """Turn 0: the whole prompt through the chat template, generation prompt added."""
    text = _template(tokenizer, messages, tools, add_generation_prompt=True)
    return _encode(tokenizer, text)


def render_suffix(
    tokenizer: Any,
    history: Sequence[Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
    tools: Any,
) -> list[int]:
    """The ids that follow the last completion: the template's end-of-turn trailer
    (the text it puts after the end-of-sequence token, e.g. a newline) plus the new
    messages and the next generation prompt.

    The suffix is the template's text for ``history + new`` beyond its text for
    ``history``; history is rendered only to measure that boundary, never to
    produce ids.
    """
    base = _template(tokenizer, history, tools, add_generation_prompt=False)
    full = _template(tokenizer, [*history, *new], tools, add_generation_prompt=True)
    if not full.startswith(base):
        raise TemplateError(
            "the chat template renders the history differently once new messages follow; "
            "cannot append tool results token-faithfully with this template"
        )
    eos = tokenizer.eos_token or ""
    cut = base.rfind(eos) if eos else -1
    trailer = base[cut + len(eos) :] if cut >= 0 else ""
    return _encode(tokenizer, trailer + full[len(base) :])


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks.

    Returns the text outside the blocks and OpenAI-shaped tool calls. A block that
    is not valid JSON is still returned as a call (with its raw text as arguments),
    so the engine answers the model with a clear error instead of ignoring it.
    """
    calls = []
    for index, match in enumerate(_TOOL_CALL.finditer(text)):
        raw = match.group(1)
        name = ""
        arguments: str = raw
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            name = data.get("name") if isinstance(data.get("name"), str) else ""
            args = data.get("arguments", data.get("parameters", {}))
            arguments = args if isinstance(args, str) else orjson.dumps(args).decode()
        calls.append(
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        )
    content = _TOOL_CALL.sub("", text).strip() if calls else text
    return content, calls


def _template(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any, *, add_generation_prompt: bool
) -> str:
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
    if tools:
        kwargs["tools"] = tools
    return tokenizer.apply_chat_template([_plain(message) for message in messages], **kwargs)


def _plain(message: Mapping[str, Any]) -> dict[str, Any]:
    """Templates expect string content and dict arguments; the engine keeps OpenAI shapes."""
    result = dict(message)
    content = result.get("content")
    if isinstance(content, list):
        result["content"] = "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    elif content is None:
        result["content"] = ""
    calls = result.get("tool_calls")
    if calls:
        converted = []
        for call in calls:
            function = dict(call.get("function", {}))
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(orjson.JSONDecodeError):
                    function["arguments"] = orjson.loads(arguments)
            converted.append({**call, "function": function})
        result["tool_calls"] = converted
    return result


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
