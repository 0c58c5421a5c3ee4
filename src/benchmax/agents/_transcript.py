"""An agent's recorded calls as a rollout: its turns, its sequences and the transcript a reward reads.

A call *continues* an earlier one when its messages start with that call's
messages and then that call's reply (the agent appended the reply, maybe tool
results and a new user turn, and asked again): that is the engine's own loop,
and its turns form one token sequence. A call that continues none of the
earlier calls (a sub-agent's first call, a history the agent summarised)
starts a new sequence. Continuation is judged on what the agent sent, not on
token ids, because a trainer's policy decides the same way when it answers
(it renders a fresh prompt for a call that continues nothing); whether the ids
really extend one another is the trainer's token check.

Messages are compared by what a chat template renders from them (role, text,
tool call names and arguments, tool call ids, names), so an SDK that echoes the
reply back with extra ``None`` fields (``refusal``, ``audio``...) or re-serialises
tool arguments still continues its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from benchmax.envs import Message, TurnRecord, content_text, message_key, truncate_text
from benchmax.proxy import RecordedCall

__all__ = ["assign_sequences", "calls_to_turns", "transcript"]

ANSWER_NAME = "final_answer"
"""The ``name`` of the assistant message benchmax appends when the agent's final answer
is not the text of its last model reply (the agent post-processed it, or made no call)."""


def continues(call: RecordedCall, earlier: RecordedCall) -> bool:
    """Whether ``call`` asked again after ``earlier``'s reply: its messages start with ``earlier``'s and that reply."""
    if earlier.message is None:
        return False
    before = earlier.messages
    if len(call.messages) <= len(before):
        return False
    if any(message_key(a) != message_key(b) for a, b in zip(call.messages, before, strict=False)):
        return False
    return message_key(call.messages[len(before)]) == message_key(earlier.message)


def assign_sequences(calls: Sequence[RecordedCall]) -> list[int]:
    """Each call's sequence: the most recent sequence whose last call it continues, else a new one."""
    sequences: list[int] = []
    last: dict[int, RecordedCall] = {}
    for call in calls:
        found = None
        for sequence, earlier in sorted(last.items(), key=lambda item: -item[1].index):
            if continues(call, earlier):
                found = sequence
                break
        sequence = found if found is not None else len(last)
        sequences.append(sequence)
        last[sequence] = call
    return sequences


def answered(calls: Sequence[RecordedCall]) -> list[RecordedCall]:
    """The calls the model answered (a refused or failed call made no turn)."""
    return [call for call in calls if call.message is not None]


def calls_to_turns(calls: Sequence[RecordedCall], ended_at: float) -> tuple[TurnRecord, ...]:
    """One turn per answered call, numbered in order, with its sequence; the time until the
    agent's next call (or its end) is the turn's tool time: what the agent did with the reply."""
    kept = answered(calls)
    sequences = assign_sequences(kept)
    turns = []
    for position, (call, sequence) in enumerate(zip(kept, sequences, strict=True)):
        following = kept[position + 1].started_at if position + 1 < len(kept) else ended_at
        turn = call.as_turn(position)
        turns.append(replace(turn, tool_seconds=max(0.0, following - call.ended_at), sequence=sequence))
    return tuple(turns)


def transcript(
    prompt: Sequence[Message], calls: Sequence[RecordedCall], answer: str, *, max_chars: int | None = None
) -> list[Message]:
    """The rollout's messages: the last answered call's messages and its reply, then the agent's
    final answer when it is not that reply's text (before any call: the prompt, then the answer).

    ``max_chars`` (the run's ``--max-content-chars``) bounds each text in it, as the engine bounds
    its own turns: an agent sends whatever it likes, and all of it would be stored.
    """
    messages = _transcript(prompt, calls, answer)
    return messages if max_chars is None else [bounded_message(message, max_chars) for message in messages]


def bounded_message(message: Message, max_chars: int) -> Message:
    """``message`` with its content (text or text parts), reasoning and tool-call arguments cut at ``max_chars``."""
    bounded = dict(message)
    content = bounded.get("content")
    if isinstance(content, str):
        bounded["content"] = truncate_text(content, max_chars)
    elif isinstance(content, list):
        bounded["content"] = [
            {**part, "text": truncate_text(part["text"], max_chars)}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    for key in ("reasoning_content", "reasoning"):
        if isinstance(bounded.get(key), str):
            bounded[key] = truncate_text(bounded[key], max_chars)
    calls = bounded.get("tool_calls")
    if isinstance(calls, list):
        bounded["tool_calls"] = [_bounded_call(call, max_chars) for call in calls]
    return bounded


def _bounded_call(call: object, max_chars: int) -> object:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": truncate_text(function["arguments"], max_chars)}}  # type: ignore[dict-item]


def _transcript(prompt: Sequence[Message], calls: Sequence[RecordedCall], answer: str) -> list[Message]:
    kept = answered(calls)
    if kept:
        last = kept[-1]
        messages = [dict(message) for message in last.messages]
        assert last.message is not None
        reply = dict(last.message)
        reply.setdefault("role", "assistant")
        messages.append(reply)
        said = content_text(reply.get("content")).strip()
    else:
        messages = [dict(message) for message in prompt]
        said = ""
    if answer.strip() and answer.strip() != said:
        messages.append({"role": "assistant", "content": answer, "name": ANSWER_NAME})
    return messages
