"""The row schema of ``benchmax-sft-v1``, checked in a fixed order so issue lists are reproducible.

Order within a row: unknown top-level keys, tool definitions, the messages
(tool results linked to their calls as they come), "calls need tools",
metadata, and last "at least one trainable assistant turn". Nothing here
raises on bad input; every problem goes to ``emit(location, message)``.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmax.sft._strict_json import StrictJsonError, canonical_json_bytes, check_json_tree, parse_strict_json

MAX_MESSAGES = 1024
MAX_TOOLS = 128
MAX_ROW_BYTES = 1_048_576
MAX_METADATA_BYTES = 65_536
RESERVED_METADATA_PREFIX = "_castform_"

Emit = Callable[[str, str], None]

_ROW_KEYS = frozenset({"messages", "tools", "metadata"})
_ROLES = ("assistant", "system", "tool", "user")
_ROLE_LIST = ", ".join(f'"{role}"' for role in _ROLES)


def _extra_keys(mapping: dict[str, object], allowed: frozenset[str]) -> str:
    return ", ".join(sorted(key for key in mapping if key not in allowed))


def _text(value: object) -> bool:
    return type(value) is str and value != ""


class _CallWindow:
    """The tool calls of the latest assistant turn that still await results, in declared order.

    Results must follow their assistant turn directly, one per call, in the
    order the calls were made; any other message closes the window and the
    calls left open are reported.
    """

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.declared: set[str] = set()
        self.resolved: set[str] = set()
        self.open: list[str] = []
        self.where = ""

    def start(self, where: str, call_ids: list[str]) -> None:
        self.close()
        self.open = list(call_ids)
        self.where = where

    def close(self) -> None:
        if self.open:
            waiting = ", ".join(repr(call_id) for call_id in self.open)
            self.emit(
                f"{self.where}.tool_calls",
                f"tool call id(s) {waiting} have no tool result before the next non-tool message",
            )
        self.open = []

    def answer(self, where: str, call_id: str) -> None:
        target = f"{where}.tool_call_id"
        if self.open and self.open[0] == call_id:
            self.open.pop(0)
            self.resolved.add(call_id)
        elif call_id in self.open:
            self.emit(target, f"tool result for id {call_id!r} is out of declaration order")
            self.open.remove(call_id)
            self.resolved.add(call_id)
        elif call_id in self.resolved:
            self.emit(target, f"duplicate tool result for id {call_id!r}")
        elif call_id in self.declared:
            self.emit(target, f"tool result for id {call_id!r} appears after its tool-call window closed")
        else:
            self.emit(target, f"tool result references unknown tool_call_id {call_id!r}")


def validate_row(row: dict[str, object], emit: Emit) -> None:
    """Check one row (already tree-checked) against the schema, reporting through ``emit``."""
    extra = _extra_keys(row, _ROW_KEYS)
    if extra:
        emit("$", f"unknown top-level key(s): {extra}")
    tool_names = _check_tools(row, emit)
    makes_calls, trainable = _check_messages(row, tool_names, emit)
    if makes_calls:
        tools = row.get("tools")
        if type(tools) is not list or not tools:
            emit("$.tools", "tools must be a non-empty list when any message makes a tool call")
    _check_metadata(row, emit)
    messages = row.get("messages")
    if type(messages) is list and messages and not trainable:
        emit("$.messages", "at least one assistant message with weight 1 (or omitted weight) is required")


def _check_tools(row: dict[str, object], emit: Emit) -> set[str] | None:
    """The defined function names, or ``None`` when there are no usable definitions to check calls against."""
    if "tools" not in row:
        return None
    tools = row["tools"]
    if type(tools) is not list:
        emit("$.tools", "tools must be a list")
        return None
    if not tools:
        return None  # "calls need tools" reports it if a call exists
    if len(tools) > MAX_TOOLS:
        emit("$.tools", f"tools has {len(tools)} entries; the maximum is {MAX_TOOLS}")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        _check_tool(tool, f"$.tools[{index}]", names, emit)
    return names


def _check_tool(tool: object, where: str, names: set[str], emit: Emit) -> None:
    if type(tool) is not dict:
        emit(where, "tool definition must be a JSON object")
        return
    extra = _extra_keys(tool, frozenset({"type", "function"}))
    if extra:
        emit(where, f"unknown key(s): {extra}")
    if tool.get("type") != "function":
        emit(f"{where}.type", 'tool definition type must be the literal "function"')
    if "function" not in tool:
        emit(where, "tool definition requires a function object")
        return
    function = tool["function"]
    if type(function) is not dict:
        emit(f"{where}.function", "function must be a JSON object")
        return
    extra = _extra_keys(function, frozenset({"name", "parameters", "description"}))
    if extra:
        emit(f"{where}.function", f"unknown key(s): {extra}")
    name = function.get("name")
    if not _text(name):
        emit(f"{where}.function.name", "name must be a non-empty string")
    elif name in names:
        emit(f"{where}.function.name", f"duplicate tool definition for function {name!r}")
    else:
        names.add(name)  # type: ignore[arg-type]
    if "parameters" not in function:
        emit(f"{where}.function", "parameters is required and must be a JSON object")
    elif type(function["parameters"]) is not dict:
        emit(f"{where}.function.parameters", "parameters must be a JSON object")
    elif "type" in function["parameters"] and function["parameters"]["type"] != "object":
        emit(f"{where}.function.parameters.type", 'parameters type, when declared, must be "object"')
    if "description" in function and type(function["description"]) is not str:
        emit(f"{where}.function.description", "description must be a string")


def _check_messages(row: dict[str, object], tool_names: set[str] | None, emit: Emit) -> tuple[bool, int]:
    """Whether any turn calls a tool, and how many assistant turns are trainable."""
    if "messages" not in row:
        emit("$", "messages is required")
        return False, 0
    messages = row["messages"]
    if type(messages) is not list:
        emit("$.messages", "messages must be a list")
        return False, 0
    if not messages:
        emit("$.messages", "messages must not be empty")
        return False, 0
    if len(messages) > MAX_MESSAGES:
        emit("$.messages", f"messages has {len(messages)} entries; the maximum is {MAX_MESSAGES}")
    window = _CallWindow(emit)
    makes_calls = False
    trainable = 0
    for index, message in enumerate(messages):
        where = f"$.messages[{index}]"
        if type(message) is not dict:
            window.close()
            emit(where, "message must be a JSON object")
            continue
        role = message.get("role")
        if role == "tool":
            _check_tool_result(message, where, window, emit)
            continue
        window.close()
        if role == "assistant":
            calls, counts = _check_assistant(message, where, tool_names, window, emit)
            makes_calls = makes_calls or calls
            trainable += counts
        elif role in ("system", "user"):
            _check_plain(message, where, emit)
        elif "role" not in message:
            emit(where, "role is required")
        else:
            emit(f"{where}.role", f"role must be one of {_ROLE_LIST}")
    window.close()
    return makes_calls, trainable


def _check_plain(message: dict[str, object], where: str, emit: Emit) -> None:
    extra = _extra_keys(message, frozenset({"role", "content"}))
    if extra:
        note = " (weight is only supported on assistant messages)" if "weight" in message else ""
        emit(where, f"unknown key(s): {extra}{note}")
    content = message.get("content")
    if type(content) is not str:
        emit(f"{where}.content", "content must be a string")
    elif not content:
        emit(f"{where}.content", "content must not be empty")


def _check_assistant(
    message: dict[str, object], where: str, tool_names: set[str] | None, window: _CallWindow, emit: Emit
) -> tuple[bool, int]:
    extra = _extra_keys(message, frozenset({"role", "content", "tool_calls", "weight"}))
    if extra:
        emit(where, f"unknown key(s): {extra}")
    content = message.get("content")
    if content is not None and type(content) is not str:
        emit(f"{where}.content", "content must be a string or null")
        content = None
    weight_ok = True
    if "weight" in message and (type(message["weight"]) is not int or message["weight"] not in (0, 1)):
        emit(f"{where}.weight", "weight must be the integer 0 or 1")
        weight_ok = False
    call_ids: list[str] = []
    makes_calls = False
    if "tool_calls" in message:
        calls = message["tool_calls"]
        if type(calls) is not list or not calls:
            emit(f"{where}.tool_calls", "tool_calls must be a non-empty list when present")
        else:
            makes_calls = True
            for index, call in enumerate(calls):
                call_id = _check_call(call, f"{where}.tool_calls[{index}]", tool_names, window, emit)
                if call_id is not None:
                    call_ids.append(call_id)
    says_something = _text(content) or makes_calls
    if not says_something:
        emit(where, "assistant message needs non-empty content or at least one tool call")
    window.start(where, call_ids)
    trains = weight_ok and message.get("weight", 1) != 0 and says_something
    return makes_calls, int(trains)


def _check_call(call: object, where: str, tool_names: set[str] | None, window: _CallWindow, emit: Emit) -> str | None:
    """Check one tool call; its id when the id can link a result."""
    if type(call) is not dict:
        emit(where, "tool call must be a JSON object")
        return None
    extra = _extra_keys(call, frozenset({"id", "type", "function"}))
    if extra:
        emit(where, f"unknown key(s): {extra}")
    if call.get("type") != "function":
        emit(f"{where}.type", 'tool call type must be the literal "function"')
    call_id = call.get("id")
    linked: str | None = None
    if not _text(call_id):
        emit(f"{where}.id", "id must be a non-empty string")
    elif call_id in window.declared:
        emit(f"{where}.id", f"duplicate tool call id {call_id!r}")
    else:
        window.declared.add(call_id)  # type: ignore[arg-type]
        linked = call_id  # type: ignore[assignment]
    if "function" not in call:
        emit(where, "tool call requires a function object")
        return linked
    function = call["function"]
    if type(function) is not dict:
        emit(f"{where}.function", "function must be a JSON object")
        return linked
    extra = _extra_keys(function, frozenset({"name", "arguments"}))
    if extra:
        emit(f"{where}.function", f"unknown key(s): {extra}")
    name = function.get("name")
    if not _text(name):
        emit(f"{where}.function.name", "name must be a non-empty string")
    elif tool_names is not None and name not in tool_names:
        emit(f"{where}.function.name", f"tool call references undefined function {name!r}")
    arguments_at = f"{where}.function.arguments"
    arguments = function.get("arguments")
    if type(arguments) is not str:
        emit(arguments_at, "arguments must be a JSON-encoded string")
        return linked
    try:
        decoded = parse_strict_json(arguments)
    except StrictJsonError as exc:
        emit(arguments_at, f"arguments must decode as JSON: {exc}")
        return linked
    if type(decoded) is not dict:
        emit(arguments_at, "arguments must decode as a JSON object")
        return linked
    check_json_tree(decoded, arguments_at, emit)
    return linked


def _check_tool_result(message: dict[str, object], where: str, window: _CallWindow, emit: Emit) -> None:
    extra = _extra_keys(message, frozenset({"role", "content", "tool_call_id"}))
    if extra:
        emit(where, f"unknown key(s): {extra}")
    if type(message.get("content")) is not str:
        emit(f"{where}.content", "content must be a string")
    call_id = message.get("tool_call_id")
    if not _text(call_id):
        emit(f"{where}.tool_call_id", "tool_call_id must be a non-empty string")
        return
    window.answer(where, call_id)  # type: ignore[arg-type]


def _check_metadata(row: dict[str, object], emit: Emit) -> None:
    if "metadata" not in row:
        return
    metadata = row["metadata"]
    if type(metadata) is not dict:
        emit("$.metadata", "metadata must be a JSON object")
        return
    for key in metadata:
        if type(key) is str and key.startswith(RESERVED_METADATA_PREFIX):
            emit("$.metadata", f"metadata key {key!r} uses the reserved {RESERVED_METADATA_PREFIX!r} prefix")
        if key == "tools":
            # The trainer keeps the row's tool definitions there; a user value would skip validation.
            emit(
                "$.metadata",
                'metadata key "tools" is reserved for the training runtime; declare tools at the top level of the row',
            )
    try:
        size = len(canonical_json_bytes(metadata))
    except (TypeError, ValueError):
        return  # the tree check has reported what cannot be encoded
    if size > MAX_METADATA_BYTES:
        emit("$.metadata", f"metadata canonical size is {size} bytes; the maximum is {MAX_METADATA_BYTES}")
