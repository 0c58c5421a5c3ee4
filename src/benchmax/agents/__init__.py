"""Agent programs as environments: the agent you already have, run, recorded, scored and trained.

:class:`AgentEnv` runs an async function or a command (any language, any SDK) per
rollout against a lease of the recording proxy (:mod:`benchmax.proxy`); the calls
it makes become the rollout's turns, sequences and transcript, its log lines the
rollout's logs, and the env's reward hooks score it as any ``BaseEnv`` rollout.
See ``docs/agents.md``.
"""

from benchmax.agents._env import AGENT_ERROR, DEFAULT_TIMEOUT, AgentEnv
from benchmax.agents._run import AgentFunction, AgentRun
from benchmax.agents._transcript import ANSWER_NAME, assign_sequences, calls_to_turns, transcript

__all__ = [
    "AGENT_ERROR",
    "ANSWER_NAME",
    "DEFAULT_TIMEOUT",
    "AgentEnv",
    "AgentFunction",
    "AgentRun",
    "assign_sequences",
    "calls_to_turns",
    "transcript",
]
