"""The rollout engine: the model loop, tool dispatch, scoring and settling, log capture.

It knows the env contract and the model client, and nothing of the store or the
faces above it. Importing it registers it as the engine behind 0.2.x's
``Environment.run_group`` (see :mod:`benchmax.envs._runtime`).
"""

from benchmax.engine._config import EngineConfig
from benchmax.engine._engine import Engine
from benchmax.engine._records import GroupResult, StoredRollout
from benchmax.engine._tools import validate_tools
from benchmax.envs import register_engine

register_engine(Engine)

__all__ = ["Engine", "EngineConfig", "GroupResult", "StoredRollout", "validate_tools"]
