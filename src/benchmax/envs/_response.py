"""What an env says after a model turn: the next observation, a reward for the turn, whether the episode is over.

``BaseEnv.env_response`` returns one :class:`EnvResponse` per assistant turn. It is
a frozen record because it crosses boundaries as it is: from the env to the engine,
over the wire from ``benchmax serve``, into the turn record the store keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ENV_RESPONSE_ROLES: tuple[str, ...] = ("user",)
"""The roles an env's observation may take.

``user`` only: every chat template and OpenAI-compatible server accepts a user turn
after an assistant or tool turn; ``tool`` needs the id of a call the model made,
``system`` in mid-conversation is refused by several templates (Gemma, Mistral) and
silently moved by others, and ``assistant`` would put words in the policy's mouth
that a trainer would then train on as if it had sampled them.
"""


@dataclass(frozen=True, slots=True)
class EnvResponse:
    """The env's answer to one assistant turn.

    ``messages`` are appended to the transcript after the turn (and after its tool
    results): plain strings become user messages; dicts must be user messages
    (:data:`ENV_RESPONSE_ROLES`). ``rewards`` score this turn on its own
    (``{component: number}``), stored on its :class:`~benchmax.envs.TurnRecord`;
    the rollout's outcome is still what ``compute_reward`` and
    ``compute_group_rewards`` return. ``done`` ends the episode: the rollout
    finishes (``finished``) and is scored. ``info`` is a short verdict for people
    (shown in the inspector beside the turn, never sent to the model).
    """

    messages: Sequence[str | Mapping[str, Any]] = ()
    rewards: Mapping[str, float] | None = None
    done: bool = False
    info: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.messages, str | bytes | Mapping):
            # one message given bare: the commonest slip, kept as the one message it is
            object.__setattr__(self, "messages", (self.messages,))
        elif not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
