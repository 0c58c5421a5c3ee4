"""verifiers environments: ``verifiers:ENV`` (not mapped yet; see :func:`verifiers_env_class`)."""

from __future__ import annotations

from benchmax.adapters._extras import require
from benchmax.envs import BaseEnv, EnvSpecError


def verifiers_env_class(spec: str) -> type[BaseEnv]:
    """Refuse, naming what to run instead: verifiers 0.4's tasksets and harnesses are not mapped yet."""
    verifiers = require("verifiers", spec)
    raise EnvSpecError(
        f"{spec}: verifiers {verifiers.__version__} environments (tasksets and harnesses) are not supported as an "
        "env spec yet; run a benchmax env under verifiers instead (benchmax.train.adapters.verifiers)"
    )
