"""OpenAI-compatible message and tool shapes used by :class:`BaseEnv` (0.2.x's module path)."""

from benchmax.envs._types import Message, Messages, Tool

__all__ = ["Message", "Messages", "Tool"]
