"""What one eval run is: the env, the model, the sampling and the schedule."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from benchmax.auth import BasicAuth, redact_url, split_credentials
from benchmax.client import CacheSettings, RetryPolicy
from benchmax.engine import EngineConfig
from benchmax.envs import SPLITS, DatasetSplit, SamplingParams
from benchmax.loading import EnvSpec, adapter_name
from benchmax.mix import MixSpec

EMBEDDED = "embedded"
"""The ``base_url`` that means: start the embedded SmolLM2 model."""

EXECUTORS = ("local", "ray")
DEFAULT_CONCURRENCY = 64
"""Rollouts in flight when ``--concurrency`` is not given (eval, rescore and their Python APIs)."""
DEFAULT_MAX_FAILURE_RATE = 0.1
"""A run whose operational failures exceed this share of its rollouts did not do its job."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs; stored (without secrets) so ``--resume`` can rebuild it.

    ``concurrency`` counts rollouts in flight: groups are launched while their
    siblings fit, so at most ``max(concurrency, group_size)`` rollouts run at once.
    ``batch_size`` counts rollouts per zero-fill batch (a multiple of
    ``group_size``); ``None`` makes the whole run one batch.
    ``max_failure_rate`` is the share of operational failures past which the run
    counts as failed (the CLI then exits 1).
    ``https://USER:PASSWORD@host/v1`` in ``base_url`` is sent as basic auth (as
    curl does): the credentials move to ``credentials`` and the URL keeps none.
    They are never stored, so ``--resume`` needs the URL given again, and they
    cannot be combined with ``api_key_env`` (one ``Authorization`` header).
    """

    env: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    data_dir: Path | None = None
    split: DatasetSplit = "eval"
    max_examples: int | None = None
    group_size: int = 1
    concurrency: int = DEFAULT_CONCURRENCY
    batch_size: int | None = None
    model: str | None = None
    """The model name sent to the server; ``None``: the one model the server lists."""
    check_model: bool = True
    """Refuse a ``model`` the server's ``/models`` does not list (``benchmax.client.choose_model``);
    off for a gateway whose list is partial."""
    base_url: str | tuple[str, ...] = EMBEDDED
    """The endpoint (``…/v1``), or several replicas of one model (a list); ``embedded`` by default."""
    api_key_env: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    run_dir: Path | None = None
    pass_threshold: float = 1.0
    max_failure_rate: float = DEFAULT_MAX_FAILURE_RATE
    engine: EngineConfig = field(default_factory=EngineConfig)
    executor: str = "local"
    """``local`` (this process) or ``ray`` (a pool of Ray actors)."""
    ray_address: str | None = None
    workers: int | None = None
    cache: CacheSettings | None = None
    """The response cache (``None``: off, the default: an eval samples the model unless asked not to)."""
    prices: str | None = None
    """The user's price file (``None``: ``$BENCHMAX_PRICES``, else only the shipped table)."""
    max_cost: float | None = None
    """US dollars the run may spend on model calls (all sessions together); past it the run stops, resumable."""
    credentials: BasicAuth | None = field(default=None, repr=False, compare=False)
    """The basic credentials ``base_url`` carried (never stored)."""
    mix: MixSpec | None = None
    """A mixture of envs run as one (``benchmax eval A B C``): its members, their weights, kwargs and
    caps, and the seed of the training draw. ``env`` then only labels the run (the members' names);
    ``env_kwargs`` and ``data_dir`` are per member, in ``mix``."""

    def __post_init__(self) -> None:
        if self.mix is not None and (self.env_kwargs or self.data_dir is not None):
            raise ValueError(
                "a mixture's env kwargs and data directories are per env: give them in its members "
                "(--env-arg NAME:KEY=VALUE), not as the run's env_kwargs or data_dir"
            )
        urls, credentials = _base_urls(self.base_url)
        object.__setattr__(self, "base_url", urls[0] if len(urls) == 1 else urls)
        if credentials is not None:
            if self.credentials is not None and self.credentials != credentials:
                raise ValueError(f"base_url {redact_url(urls[0])} carries other credentials than the ones given")
            object.__setattr__(self, "credentials", credentials)
        if self.credentials is not None and self.api_key_env:
            raise ValueError(
                f"--base-url {redact_url(urls[0])} carries credentials (user:password@, sent as basic auth) and "
                f"--api-key-env {self.api_key_env} names a key (sent as a bearer token); a request carries one "
                "Authorization header: give the credentials in one place"
            )
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 rollouts, got {self.concurrency}")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError(f"max_examples must be >= 1, got {self.max_examples}")
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise ValueError(f"max_failure_rate must be between 0 and 1, got {self.max_failure_rate}")
        if self.max_cost is not None and not self.max_cost > 0:
            raise ValueError(f"max_cost must be > 0 US dollars, got {self.max_cost!r}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        if self.batch_size is not None and (
            self.batch_size < self.group_size or self.batch_size % self.group_size
        ):
            raise ValueError(
                f"batch_size ({self.batch_size} rollouts) must be a positive multiple of "
                f"group_size ({self.group_size}) so groups are never split across batches"
            )

    @classmethod
    def of(cls, env: EnvSpec | MixSpec, **options: Any) -> RunConfig:
        """A run of ``env``, typed: one env or a mixture (:func:`target_fields`)."""
        return cls(**target_fields(env), **options)

    @property
    def target(self) -> EnvSpec | MixSpec:
        """What the run runs, typed: the mixture, or the one env with its kwargs."""
        return self.mix if self.mix is not None else EnvSpec(self.env, self.env_kwargs)

    @property
    def base_urls(self) -> tuple[str, ...]:
        """The replicas the run's requests are spread over (one for a single endpoint)."""
        return self.base_url if isinstance(self.base_url, tuple) else (self.base_url,)

    def with_run_dir(self, default_root: Path = Path("runs")) -> RunConfig:
        if self.run_dir is not None:
            return self
        if self.mix is not None:
            label = "mix-" + "-".join(member.name for member in self.mix.members)[:60]
            return replace(self, run_dir=default_root / f"{label}-{time.strftime('%Y%m%d-%H%M%S')}")
        return replace(self, run_dir=default_run_dir(self.env, default_root))

    def groups_per_batch(self) -> int | None:
        return None if self.batch_size is None else self.batch_size // self.group_size

    def to_meta(self) -> dict[str, Any]:
        """The JSON form stored in the run; holds the API key's variable name, never the key, and no credentials."""
        data = asdict(replace(self, credentials=None))
        del data["credentials"]
        data["base_url"] = (
            redact_url(self.base_url) if isinstance(self.base_url, str) else [redact_url(url) for url in self.base_url]
        )
        data["data_dir"] = str(self.data_dir) if self.data_dir is not None else None
        data["run_dir"] = str(self.run_dir) if self.run_dir is not None else None
        data["sampling"]["stop"] = list(self.sampling.stop) if self.sampling.stop else None
        data["engine"]["retry"] = asdict(self.engine.retry)
        del data["engine"]["telemetry"]  # where traces go is this session's choice (and URL), not the run's
        data["cache"] = self.cache.to_meta() if self.cache is not None else None
        if self.mix is None:
            del data["mix"]  # a run of one env stores what it always stored
        else:
            data["mix"] = self.mix.to_json()
        return data

    @classmethod
    def from_meta(cls, data: Mapping[str, Any]) -> RunConfig:
        known = {item.name for item in fields(cls)} - {"credentials"}
        values = {key: value for key, value in data.items() if key in known}
        sampling = SamplingParams.from_dict(values.pop("sampling", None))
        engine = dict(values.pop("engine", {}) or {})
        if "retry" in engine:
            engine["retry"] = RetryPolicy(**engine["retry"])
        if "max_concurrent_requests" in engine:  # the name runs stored before 0.3's knobs had one name each
            engine.setdefault("max_requests", engine.pop("max_concurrent_requests"))
        engine_fields = {item.name for item in fields(EngineConfig)}
        engine = {key: value for key, value in engine.items() if key in engine_fields}
        for key in ("data_dir", "run_dir"):
            if values.get(key) is not None:
                values[key] = Path(values[key])
        values["cache"] = CacheSettings.from_meta(values.get("cache"))
        if values.get("mix") is not None:
            values["mix"] = MixSpec.from_json(values["mix"])
        return cls(sampling=sampling, engine=EngineConfig(**engine), **values)


def _base_urls(value: str | Sequence[str]) -> tuple[tuple[str, ...], BasicAuth | None]:
    """The URLs without user info, and the one set of credentials their user info held."""
    given = (value,) if isinstance(value, str) else tuple(value)
    if not given or not all(isinstance(url, str) and url.strip() for url in given):
        shown = redact_url(value) if isinstance(value, str) else [redact_url(url) if isinstance(url, str) else url
                                                                   for url in given]  # fmt: skip
        raise ValueError(f"base_url must be a URL or a list of URLs, got {shown!r}")
    split = [split_credentials(url) for url in given]
    urls = tuple(url for url, _ in split)
    found = {credentials for _, credentials in split}
    if len(found) > 1:
        raise ValueError(
            "the --base-url replicas carry different credentials (user:password@); one set is sent to every "
            "replica: give each URL the same user info"
        )
    if len(urls) > 1:
        if EMBEDDED in urls:
            raise ValueError("the embedded model cannot be one of several replicas: give only --base-url URLs")
        stripped = [url.rstrip("/") for url in urls]
        twice = sorted({url for url in stripped if stripped.count(url) > 1})
        if twice:
            raise ValueError(
                f"base_url lists {', '.join(map(redact_url, twice))} more than once; give each replica once"
            )
    return urls, found.pop()


def target_fields(env: EnvSpec | MixSpec) -> dict[str, Any]:
    """The stored fields of a config (:class:`RunConfig`, the trainer's) that say what it runs: one
    env's spec and constructor kwargs, or a mixture and ``env`` as its label (:attr:`MixSpec.label`)."""
    if isinstance(env, MixSpec):
        return {"env": env.label, "mix": env}
    return {"env": env.spec, "env_kwargs": dict(env.kwargs)}


def default_run_dir(env: str, root: Path = Path("runs"), *, prefix: str = "") -> Path:
    """``runs/[PREFIX]NAME-YYYYmmdd-HHMMSS``, NAME being the env's own name (the same rule for eval and train).

    NAME is the last part of the spec that names the env: the directory of a
    directory spec, the file stem of ``path/env.py:Class``, the module of
    ``package.module:Class``, the package of an installed env.
    """
    return root / f"{prefix}{env_name(env)}-{time.strftime('%Y%m%d-%H%M%S')}"


def env_name(env: str) -> str:
    """The env's own name, from the spec that names it (see :func:`default_run_dir`); a mixture
    names each of its envs by it unless told another name."""
    adapted = adapter_name(env)
    if adapted is not None:
        return adapted
    spec = redact_url(env).rstrip("/").split("@", 1)[0]
    head = spec.rsplit(":", 1)[0] if ":" in spec and not Path(spec).exists() else spec
    path = Path(head)
    if path.suffix == ".py":
        name = path.parent.name if path.stem in ("env", "main") and path.parent.name else path.stem
    elif path.exists() or "/" in head:
        name = path.name
    else:
        name = head.rsplit(".", 1)[-1]
    return name or "run"
