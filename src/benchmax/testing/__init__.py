"""Test helpers that ship with benchmax, so env authors can test envs the same way.

``ScriptedServer`` is an OpenAI-compatible chat server whose answers a test
scripts; ``python -m benchmax.testing --port 8000`` runs it as a process.
"""

from benchmax.testing._process import ServerProcess, free_port
from benchmax.testing._server import ScriptedServer, echo_policy, embed_text, find_script

__all__ = ["ScriptedServer", "ServerProcess", "echo_policy", "embed_text", "find_script", "free_port"]
