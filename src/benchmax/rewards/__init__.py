"""Reward helpers for env code: each returns plain values or ``{component: float}`` dicts."""

from benchmax.rewards.text import content_text, extract_completion_text

__all__ = ["content_text", "extract_completion_text"]
