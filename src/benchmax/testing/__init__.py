"""Test helpers that ship with benchmax, so env authors can test envs the same way."""

from benchmax.testing.server import ScriptedServer, echo_policy, embed_text, find_script

__all__ = ["ScriptedServer", "echo_policy", "embed_text", "find_script"]
