"""The task-independent part of a Harbor trial, shared by every rollout of a HarborEnv."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

    from benchmax.harbor._bundled_agent import BundledHarborAgent

_MULTIPLIERS = (
    "timeout_multiplier",
    "agent_timeout_multiplier",
    "verifier_timeout_multiplier",
    "agent_setup_timeout_multiplier",
    "environment_build_timeout_multiplier",
)


@dataclass(frozen=True, slots=True, repr=False)
class HarborTrialTemplate:
    """Everything of Harbor's ``TrialConfig`` except what differs per rollout.

    ``TrialConfig`` itself cannot be the template: it needs a resolved task, a
    trial name and an output directory, which ``HarborEnv`` supplies for each
    rollout; every field here is passed through to it unchanged.
    """

    agent: AgentConfig | BundledHarborAgent
    environment: EnvironmentConfig
    verifier: VerifierConfig
    trials_dir: Path = Path("trials")
    timeout_multiplier: float = 1.0
    agent_timeout_multiplier: float | None = None
    verifier_timeout_multiplier: float | None = None
    agent_setup_timeout_multiplier: float | None = None
    environment_build_timeout_multiplier: float | None = None
    artifacts: tuple[Any, ...] = ()
    extra_instruction_paths: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        for name in ("agent", "environment", "verifier"):
            if getattr(self, name) is None:
                raise ValueError(f"HarborTrialTemplate.{name} is required (a Harbor {name} config)")
        trials_dir = Path(self.trials_dir).expanduser()
        if not str(trials_dir):
            raise ValueError("HarborTrialTemplate.trials_dir must be a non-empty path")
        object.__setattr__(self, "trials_dir", trials_dir)
        object.__setattr__(self, "artifacts", tuple(self.artifacts))
        object.__setattr__(
            self, "extra_instruction_paths", tuple(Path(path).expanduser() for path in self.extra_instruction_paths)
        )
        for name in _MULTIPLIERS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"HarborTrialTemplate.{name} must be a positive number, got {value!r}")

    def __repr__(self) -> str:
        return (
            f"HarborTrialTemplate(trials_dir={self.trials_dir!r}, "
            f"timeout_multiplier={self.timeout_multiplier!r}, artifacts={len(self.artifacts)})"
        )
