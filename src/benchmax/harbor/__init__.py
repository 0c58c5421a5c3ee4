"""Harbor tasks as a benchmax environment, on Harbor's sandboxes or on benchmax's local one.

``HarborEnv`` has the configuration surface of benchmax 0.2.5 (Harbor's
``DatasetConfig`` and a ``HarborTrialTemplate`` of agent, environment and
verifier configs). ``LOCAL_SANDBOX`` is the environment ``import_path`` that
runs trials in benchmax's local bubblewrap sandbox. Importing this package does
not import Harbor; constructing a ``HarborEnv`` needs ``benchmax[harbor]``
(Python 3.12+).
"""

from typing import Any

from benchmax.harbor._bundled_agent import BundledAgentSource, BundledHarborAgent
from benchmax.harbor._credentials import (
    CustomSandboxCredentials,
    DaytonaCredentials,
    ModalCredentials,
    SandboxCredentials,
    sandbox_credentials_scope,
)
from benchmax.harbor._dataset import HarborDataset
from benchmax.harbor._deps import require_harbor
from benchmax.harbor._env import HarborDiagnostic, HarborEnv
from benchmax.harbor._types import HarborTrialTemplate

LOCAL_SANDBOX = "benchmax.harbor:LocalSandboxEnvironment"
"""``EnvironmentConfig(import_path=LOCAL_SANDBOX)`` runs Harbor trials in benchmax's local sandbox."""

__all__ = [
    "LOCAL_SANDBOX",
    "BundledAgentSource",
    "BundledHarborAgent",
    "CustomSandboxCredentials",
    "DaytonaCredentials",
    "HarborDataset",
    "HarborDiagnostic",
    "HarborEnv",
    "HarborTrialTemplate",
    "LocalSandboxEnvironment",
    "ModalCredentials",
    "SandboxCredentials",
    "require_harbor",
    "sandbox_credentials_scope",
]


def __getattr__(name: str) -> Any:
    if name == "LocalSandboxEnvironment":  # a Harbor class: importing it imports Harbor
        require_harbor()
        from benchmax.harbor._local import LocalSandboxEnvironment

        return LocalSandboxEnvironment
    raise AttributeError(f"module 'benchmax.harbor' has no attribute {name!r}")
