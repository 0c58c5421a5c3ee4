"""Token-faithful chat rendering: the prompt once, then only the new messages.

A trainer must see exactly the tokens the policy generated. Re-rendering the
whole chat each turn breaks that: templates rewrite history (Qwen3-style ones
drop empty think blocks, some re-space tool calls), so the ids of earlier turns
change under the model. Here the first turn is rendered with the chat template;
every later turn appends the previous completion's ids as generated plus a
suffix for the new messages (tool results) only.

A template that ignores ``tools`` (SmolLM2's renders ``content`` only) would
hide the env's tools from the model, and the calls in earlier assistant
messages (a worked example in the prompt) with them. Then benchmax renders
tools Hermes-style itself: one line per tool in the system turn, with the
``<tool_call>`` format the policy parses, and each assistant message's calls
as ``<tool_call>`` text after its content; the same on every turn, so
suffixes stay exact.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from benchmax.errors import BenchmaxError

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


class TemplateError(BenchmaxError, ValueError):
    """The chat template cannot render the new messages as a suffix of the history."""


TOOL_BLOCK = (
    "You can call these tools:\n{tools}\n"
    'To call a tool, reply with <tool_call>{{"name": "TOOL", "arguments": {{...}}}}</tool_call> and nothing else. '
    "Its result comes back in the next message."
)
"""The tool block written into the system turn when the chat template ignores ``tools``."""


def render_prompt(tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[int]:
    """Turn 0: the whole prompt through the chat template, generation prompt added."""
    text = render_text(tokenizer, messages, tools, add_generation_prompt=True)
    return _encode(tokenizer, text)


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the chat template writes a ``tools`` argument into the prompt at all."""
    cached = getattr(tokenizer, "_benchmax_renders_tools", None)
    if cached is not None and cached[0] == tokenizer.chat_template:
        return bool(cached[1])
    probe = [{"role": "user", "content": "hi"}]
    tool = {"type": "function", "function": {"name": "probe_tool_xyz", "description": "d", "parameters": {}}}
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True}
    renders = tokenizer.apply_chat_template(probe, tools=[tool], **kwargs) != tokenizer.apply_chat_template(
        probe, **kwargs
    )
    with contextlib.suppress(AttributeError):
        tokenizer._benchmax_renders_tools = (tokenizer.chat_template, renders)
    return renders


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
    base = render_text(tokenizer, history, tools, add_generation_prompt=False)
    full = render_text(tokenizer, [*history, *new], tools, add_generation_prompt=True)
    if not full.startswith(base):
        raise TemplateError(
            "the chat template renders the history differently once new messages follow; "
            "cannot append tool results token-faithfully with this template"
        )
    eos = tokenizer.eos_token or ""
    cut = base.rfind(eos) if eos else -1
    trailer = base[cut + len(eos) :] if cut >= 0 else ""
    return _encode(tokenizer, trailer + full[len(base) :])


def tool_block(tools: Sequence[Mapping[str, Any]]) -> str:
    """The env's tools, one line each: ``- name(arg: type, ...): description``.

    Signatures, not JSON schemas: four calculator tools take ~80 tokens instead
    of ~280, and a small model's whole prompt is paid for on every training step.
    """
    lines = []
    for tool in tools:
        function = tool.get("function", tool)
        parameters = function.get("parameters") or {}
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        arguments = ", ".join(
            f"{name}: {spec.get('type', 'any') if isinstance(spec, Mapping) else 'any'}"
            for name, spec in (properties or {}).items()
        )
        description = str(function.get("description") or "").strip()
        lines.append(f"- {function.get('name', '')}({arguments})" + (f": {description}" if description else ""))
    return TOOL_BLOCK.format(tools="\n".join(lines))


def tool_call_text(call: Mapping[str, Any]) -> str:
    """One call as the ``<tool_call>`` text :func:`parse_tool_call_text` reads back."""
    function = call.get("function", call)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments)
    # the stdlib's spacing (", ", ": ") is how models write JSON
    return f"<tool_call>{json.dumps({'name': function.get('name', ''), 'arguments': arguments})}</tool_call>"


def parse_tool_call_text(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks.

    A block may also hold a JSON list of such calls (SmolLM2's own format).
    Returns the text outside the blocks and OpenAI-shaped tool calls. A block that
    is not valid JSON is still returned as a call (with its raw text as arguments),
    so the engine answers the model with a clear error instead of ignoring it.
    """
    calls: list[dict[str, Any]] = []
    for match in _TOOL_CALL.finditer(text):
        raw = match.group(1)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = None
        entries = data if isinstance(data, list) and data else [data]
        for entry in entries:
            name = ""
            arguments: str = raw
            if isinstance(entry, dict):
                name = entry.get("name") if isinstance(entry.get("name"), str) else ""
                args = entry.get("arguments", entry.get("parameters", {}))
                arguments = args if isinstance(args, str) else orjson.dumps(args).decode()
            calls.append(
                {
                    "id": f"call_{len(calls)}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
    content = _TOOL_CALL.sub("", text).strip() if calls else text
    return content, calls


def render_text(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Any, *, add_generation_prompt: bool
) -> str:
    """The chat template's text for ``messages`` (what prompt ids are encoded from)."""
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
    plain = [_plain(message) for message in messages]
    if tools and template_renders_tools(tokenizer):
        kwargs["tools"] = tools
    elif tools:
        plain = _with_tool_block(plain, tools)
    return tokenizer.apply_chat_template(plain, **kwargs)


def _with_tool_block(messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    block = tool_block(tools)
    rendered = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            text = "".join(tool_call_text(call) for call in calls)
            content = str(message.get("content") or "")
            message = {key: value for key, value in message.items() if key != "tool_calls"}
            message["content"] = f"{content}{text}" if content else text
        rendered.append(message)
    if rendered and rendered[0].get("role") == "system":
        first = rendered[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{block}".lstrip()}, *rendered[1:]]
    return [{"role": "system", "content": block}, *rendered]


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
