"""MCP's wire forms as the model sees them: tool declarations as OpenAI function tools,
call results as text or content parts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from benchmax.envs import Tool

_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _openai_tools(
    listing: list[dict[str, Any]], prefix: str, include: frozenset[str] | None
) -> tuple[list[Tool], dict[str, str]]:
    """MCP tool declarations as OpenAI function tools, and the exposed name -> MCP name map.

    Names are made to fit OpenAI's ``[A-Za-z0-9_-]{1,64}`` (other characters become
    ``_``; a clash gets a numeric suffix), so every model server accepts them.
    """
    tools: list[Tool] = []
    names: dict[str, str] = {}
    for item in listing:
        mcp_name = item.get("name")
        if not isinstance(mcp_name, str) or (include is not None and mcp_name not in include):
            continue
        exposed = (prefix + _NAME.sub("_", mcp_name))[:64] or "tool"
        stem, number = exposed, 2
        while exposed in names:
            suffix = f"_{number}"
            exposed, number = stem[: 64 - len(suffix)] + suffix, number + 1
        names[exposed] = mcp_name
        schema = dict(item.get("inputSchema") or {})
        for noise in ("$schema", "title"):
            schema.pop(noise, None)
        schema["type"] = schema.get("type", "object")
        schema.setdefault("properties", {})
        description = item.get("description") or item.get("title") or ""
        tools.append(
            {
                "type": "function",
                "function": {"name": exposed, "description": description, "parameters": schema},
            }
        )
    return tools, names


def _tool_result(result: Mapping[str, Any], *, prefer_structured: bool) -> str | list[Any]:
    """A ``CallToolResult`` as the model sees it: plain text when it is all text, else content parts."""
    structured = result.get("structuredContent")
    content = result.get("content") or []
    if structured is not None and (prefer_structured or not content):
        return orjson.dumps(structured).decode()
    parts = [_content_part(item) for item in content if isinstance(item, Mapping)]
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _content_part(item: Mapping[str, Any]) -> dict[str, Any]:
    """One MCP content block as an OpenAI content part (what chat models accept in a tool message)."""
    kind = item.get("type")
    if kind == "text":
        return _text(str(item.get("text", "")))
    if kind == "image":
        return _image(item.get("mimeType") or "image/png", str(item.get("data", "")))
    if kind == "resource":
        resource = item.get("resource") or {}
        uri = resource.get("uri", "")
        mime = resource.get("mimeType") or ""
        if "text" in resource:
            return _text(f"[resource {uri}]\n{resource['text']}")
        blob = str(resource.get("blob", ""))
        if mime.startswith("image/"):
            return _image(mime, blob)
        return _text(f"[resource {uri}: {mime or 'binary'}, {len(blob) * 3 // 4} bytes, not shown]")
    if kind == "resource_link":
        return _text(f"[resource link {item.get('name', '')}: {item.get('uri', '')}]")
    if kind == "audio":
        return _text(f"[audio {item.get('mimeType', '')}, {len(str(item.get('data', ''))) * 3 // 4} bytes, not shown]")
    return _text(f"[{kind} content, not shown]")


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image(mime: str, data: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def _error_text(result: Mapping[str, Any]) -> str:
    parts = [_content_part(item) for item in result.get("content") or [] if isinstance(item, Mapping)]
    text = "\n".join(part["text"] for part in parts if part["type"] == "text").strip()
    return text or "the tool reported an error without a message"
