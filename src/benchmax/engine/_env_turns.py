"""The env's answer to an assistant turn (``BaseEnv.env_response``): called, bounded and checked.

What an env returns is untrusted like a tool result: its observation text is bounded
as tool results are, its rewards are checked as ``compute_reward``'s are, and anything
the engine cannot use ends that rollout alone as ``env_response_error``, the error
naming where the hook is defined so its author finds it at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from benchmax.engine._scoring import InvalidRewards, check_rewards
from benchmax.envs import (
    ENV_RESPONSE_ROLES,
    BaseEnv,
    BaseRollout,
    EnvResponse,
    Message,
    RolloutFailure,
    TerminationReason,
    TurnRecord,
    content_text,
    shown_path,
    truncate_text,
)
from benchmax.telemetry import env_turn_result, env_turn_span

logger = logging.getLogger("benchmax.engine")

MAX_ENV_MESSAGES = 64
"""Messages one ``env_response`` may append (an observation is a message or a few)."""
MAX_INFO_CHARS = 2_000
"""Characters of an ``EnvResponse.info`` verdict kept."""


@dataclass(frozen=True, slots=True)
class EnvTurn:
    """A checked answer: the messages to append (bounded), the turn's rewards, and whether the episode is over."""

    messages: tuple[Message, ...]
    rewards: dict[str, float] | None
    done: bool
    info: str | None
    seconds: float


async def env_turn(
    env: BaseEnv,
    rollout: BaseRollout,
    *,
    turn: int,
    plain: bool,
    where: str,
    timeout: float | None,
    max_chars: int,
) -> EnvTurn | None:
    """Call the hook for ``turn`` and check its answer; ``None`` when it had nothing to add.

    ``plain`` says the turn was a reply without tool calls: then the env must answer
    or end the episode. Raises :class:`RolloutFailure` (``env_response_error``, or
    ``timeout`` past ``timeout`` seconds, or the env's own reason) to end the rollout.
    """
    hook = f"{type(env).__name__}.env_response ({where})"
    clock = time.perf_counter()
    with env_turn_span(turn) as active:
        try:
            async with asyncio.timeout(timeout) as limit:
                raw = await env.env_response(rollout)
        except RolloutFailure:
            raise
        except TimeoutError:
            if not limit.expired():
                raise  # the rollout's own deadline: the engine reports it
            raise RolloutFailure(
                TerminationReason.TIMEOUT, f"{hook} ran past its {timeout:g}s limit (turn {turn})"
            ) from None
        except Exception as exc:
            logger.error("%s raised %s", hook, type(exc).__name__, exc_info=exc)
            raise RolloutFailure(
                TerminationReason.ENV_RESPONSE_ERROR,
                f"{hook} raised {type(exc).__name__}{_raised_at(exc)}: {truncate_text(str(exc), 500)}",
            ) from None
        if raw is None:
            return None
        try:
            answer = _check(raw, plain=plain, max_chars=max_chars, hook=hook, seconds=time.perf_counter() - clock)
        except _Malformed as exc:
            logger.error("%s (turn %d)", exc, turn)
            raise RolloutFailure(TerminationReason.ENV_RESPONSE_ERROR, f"{exc} (turn {turn})") from None
        if active is not None:
            env_turn_result(
                active,
                done=answer.done,
                messages=len(answer.messages),
                rewards=answer.rewards,
                observation="\n".join(content_text(message.get("content")) for message in answer.messages),
            )
        return answer


def with_answer(turn: TurnRecord, answer: EnvTurn) -> TurnRecord:
    """The turn's record with what the env said about it."""
    return replace(
        turn,
        rewards=answer.rewards,
        env_seconds=answer.seconds,
        env_messages=len(answer.messages),
        env_info=answer.info,
    )


def _raised_at(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" at {shown_path(last.filename)}:{last.lineno}"


class _Malformed(ValueError):
    pass


def _check(raw: object, *, plain: bool, max_chars: int, hook: str, seconds: float) -> EnvTurn:
    if not isinstance(raw, EnvResponse):
        raise _Malformed(
            f"{hook} returned {type(raw).__name__}; return an EnvResponse(messages, rewards, done, info) or None"
        )
    if not isinstance(raw.done, bool):
        raise _Malformed(f"{hook} returned done={raw.done!r:.80}; done must be True or False")
    if len(raw.messages) > MAX_ENV_MESSAGES:
        raise _Malformed(
            f"{hook} returned {len(raw.messages)} messages, more than the {MAX_ENV_MESSAGES} one turn may append; "
            "join the observation into one message"
        )
    left = max_chars
    messages: list[Message] = []
    for index, item in enumerate(raw.messages):
        message, left = _message(item, index, left, hook)
        messages.append(message)
    if plain and not messages and not raw.done:
        raise _Malformed(
            f"{hook} returned no messages and done=False after a reply without tool calls: the model would be "
            "asked again with nothing new; answer with an observation, or end the episode with done=True"
        )
    try:
        rewards = None if raw.rewards is None else check_rewards(raw.rewards, hook=hook)
    except InvalidRewards as exc:
        raise _Malformed(str(exc)) from None
    info = raw.info
    if info is not None and not isinstance(info, str):
        raise _Malformed(f"{hook} returned info of type {type(info).__name__}; info must be a string or None")
    return EnvTurn(
        tuple(messages),
        rewards,
        raw.done,
        truncate_text(info, MAX_INFO_CHARS) if info is not None else None,
        seconds,
    )


def _message(item: object, index: int, left: int, hook: str) -> tuple[Message, int]:
    """One observation message as a user message, its text cut to what the response's budget leaves."""
    if isinstance(item, str):
        content: Any = item
    elif isinstance(item, Mapping):
        role = item.get("role")
        if role not in ENV_RESPONSE_ROLES:
            raise _Malformed(
                f"{hook} returned messages[{index}] with role {role!r:.40}; an env's observation is a "
                f"{' or '.join(ENV_RESPONSE_ROLES)} message (pass a string for a user message)"
            )
        content = item.get("content")
    else:
        raise _Malformed(
            f"{hook} returned messages[{index}] of type {type(item).__name__}; pass strings or user message dicts"
        )
    if isinstance(content, str):
        text = truncate_text(content, max(left, 0))
        return {"role": "user", "content": text}, left - len(content)
    if isinstance(content, list | tuple):
        parts: list[dict[str, Any]] = []
        for number, part in enumerate(content):
            if not isinstance(part, Mapping) or part.get("type") not in ("text", "image_url"):
                raise _Malformed(
                    f"{hook} returned messages[{index}].content[{number}] that is not a text or image_url part"
                )
            if part.get("type") == "text":
                text = str(part.get("text", ""))
                parts.append({"type": "text", "text": truncate_text(text, max(left, 0))})
                left -= len(text)
            else:
                url = part.get("image_url")
                size = len(str(url))
                if size > left:
                    raise _Malformed(
                        f"{hook} returned messages[{index}].content[{number}], an image of {size} characters, "
                        "past what the observation may hold (EngineConfig.max_tool_result_chars)"
                    )
                parts.append({"type": "image_url", "image_url": url})
                left -= size
        return {"role": "user", "content": parts}, left
    raise _Malformed(
        f"{hook} returned messages[{index}] whose content is {type(content).__name__}; content must be text"
    )
