"""What one eval run is: the env, the model, the sampling and the schedule."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmax.engine.engine import EngineConfig
from benchmax.envs.rollout import SamplingParams
from benchmax.envs.types import SPLITS, DatasetSplit

EMBEDDED = "embedded"
"""The ``base_url`` that means: start the embedded SmolLM2 model."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs; stored (without secrets) so ``--resume`` can rebuild it.

    ``concurrency`` counts rollouts in flight: groups are launched while their
    siblings fit, so at most ``max(concurrency, group_size)`` rollouts run at once.
    ``batch_size`` counts rollouts per zero-fill batch (a multiple of
    ``group_size``); ``None`` makes the whole run one batch.
    """

    env: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    data_dir: Path | None = None
    split: DatasetSplit = "eval"
    max_examples: int | None = None
    group_size: int = 1
    concurrency: int = 64
    batch_size: int | None = None
    model: str = "default"
    base_url: str = EMBEDDED
    api_key_env: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    run_dir: Path | None = None
    pass_threshold: float = 1.0
    engine: EngineConfig = field(default_factory=EngineConfig)
    executor: str = "local"
    """``local`` (this process) or ``ray`` (a pool of Ray actors)."""
    ray_address: str | None = None
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if self.group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 rollouts, got {self.concurrency}")
        if self.max_examples is not None and self.max_examples < 0:
            raise ValueError(f"max_examples must be >= 0, got {self.max_examples}")
        if self.batch_size is not None and (
            self.batch_size < self.group_size or self.batch_size % self.group_size
        ):
            raise ValueError(
                f"batch_size ({self.batch_size} rollouts) must be a positive multiple of "
                f"group_size ({self.group_size}) so groups are never split across batches"
            )

    def with_run_dir(self, default_root: Path = Path("runs")) -> RunConfig:
        if self.run_dir is not None:
            return self
        name = Path(self.env.rstrip("/").split(":")[-1]).stem or "run"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return replace(self, run_dir=default_root / f"{name}-{stamp}")

    def groups_per_batch(self) -> int | None:
        return None if self.batch_size is None else self.batch_size // self.group_size

    def to_meta(self) -> dict[str, Any]:
        """The JSON form stored in the run; holds the API key's variable name, never the key."""
        data = asdict(self)
        data["data_dir"] = str(self.data_dir) if self.data_dir is not None else None
        data["run_dir"] = str(self.run_dir) if self.run_dir is not None else None
        data["sampling"]["stop"] = list(self.sampling.stop) if self.sampling.stop else None
        data["engine"]["retry"] = asdict(self.engine.retry)
        return data

    @classmethod
    def from_meta(cls, data: Mapping[str, Any]) -> RunConfig:
        from benchmax.engine.client import RetryPolicy

        values = dict(data)
        sampling = SamplingParams.from_dict(values.pop("sampling", None))
        engine = dict(values.pop("engine", {}) or {})
        if "retry" in engine:
            engine["retry"] = RetryPolicy(**engine["retry"])
        for key in ("data_dir", "run_dir"):
            if values.get(key) is not None:
                values[key] = Path(values[key])
        return cls(sampling=sampling, engine=EngineConfig(**engine), **values)
