"""The arguments every env command shares: what names an env, how its constructor gets kwargs."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from copy import copy
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_type_hints

import typer
import typer.models

from benchmax.auth import AUTH_FLAG_FORM, EnvironmentKeyAuth, ModelAuthError, parse_auth_binding
from benchmax.client import DEFAULT_MAX_BYTES, PRICES_ENV, CacheSettings
from benchmax.engine import EngineConfig
from benchmax.envs import SamplingParams
from benchmax.runner import DEFAULT_CONCURRENCY, DEFAULT_MAX_FAILURE_RATE
from benchmax.telemetry import TelemetryError, TelemetrySettings

G = TypeVar("G")

_DEFAULT_ENGINE = EngineConfig()

ENV_HELP = (
    "path/to/env.py\\[:Class], a directory holding env.py, package.module:Class, an installed env, "
    "or http(s)://HOST:PORT (an env served by benchmax serve)."
)

EnvArgument = Annotated[str, typer.Argument(metavar="ENV", help=ENV_HELP, show_default=False)]
OptionalEnvArgument = Annotated[str | None, typer.Argument(metavar="ENV", help=ENV_HELP, show_default=False)]
EnvArgs = Annotated[
    list[str], typer.Option("--env-arg", metavar="KEY=VALUE", help="Constructor kwarg key=value (JSON value).")
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        help="base_dir for create_dataset (default: the env's directory, else its data/ folder, as 0.2.x envs keep it)."
    ),
]
DataDirs = Annotated[
    list[str],
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="base_dir for create_dataset (default: the env's directory, else its data/ folder, as 0.2.x envs keep "
        "it). In a mixture: NAME:DIR, once per env whose data lives elsewhere.",
        show_default=False,
    ),
]
AuthBindings = Annotated[
    list[str],
    typer.Option(
        "--auth",
        metavar=AUTH_FLAG_FORM,
        help=(
            "Bind the credential the env asks for as InjectedAuth(NAME) (e.g. a RagEnv's judge or embedding): "
            "a bearer key read from the variable BENCHMAX_AUTH_<NAME>_KEY (or VAR), sent only to URL and paths "
            "under it. Repeat for each name. The key is never stored or printed."
        ),
        show_default=False,
    ),
]


def parse_auth(values: list[str]) -> dict[str, EnvironmentKeyAuth]:
    """``--auth`` values as the providers to bind; a bad value or an unset variable is a usage error (exit 2)."""
    providers: dict[str, EnvironmentKeyAuth] = {}
    for value in values:
        try:
            name, provider = parse_auth_binding(value)
        except ModelAuthError as exc:
            raise typer.BadParameter(str(exc), param_hint="--auth") from None
        if name in providers:
            raise typer.BadParameter(f"{name!r} is bound twice; give each name once", param_hint="--auth")
        providers[name] = provider
    return providers


def parse_env_args(values: list[str], *, flag: str = "--env-arg") -> dict[str, Any]:
    """``key=value`` pairs; values are JSON when they parse as JSON, strings otherwise."""
    kwargs: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"{item!r}: use key=value with a Python identifier key", param_hint=flag)
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs


# Option groups: each a frozen dataclass whose fields are Typer options, declared once and
# taken whole by every command that has them. A command names a group as one parameter
# (``endpoint: EndpointOptions``); ``with_option_groups`` spreads the group's fields into the
# command's options (each shown under the group's heading in --help) and hands the command
# the group built from what was typed.

PANEL = "__option_panel__"


def option_group(panel: str) -> Callable[[type[G]], type[G]]:
    """Declare a frozen dataclass of options as a group shown under ``panel`` in --help."""

    def declare(cls: type[G]) -> type[G]:
        setattr(cls, PANEL, panel)
        return cls

    return declare


def _in_panel(annotation: Any, panel: str) -> Any:
    """``annotation`` with its Typer option placed in ``panel`` (unless it names its own)."""
    base, *extras = get_args(annotation)
    placed = []
    for extra in extras:
        if isinstance(extra, typer.models.OptionInfo) and extra.rich_help_panel is None:
            extra = copy(extra)
            extra.rich_help_panel = panel
        placed.append(extra)
    return Annotated[(base, *placed)]  # type: ignore[valid-type]


def with_option_groups(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` as Typer can read it: each option-group parameter spread into the group's options."""
    signature = inspect.signature(command)
    hints = get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type[Any], list[str]]] = {}
    for parameter in signature.parameters.values():
        annotation = hints.get(parameter.name, parameter.annotation)
        panel = getattr(annotation, PANEL, None)
        if panel is None:
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
            continue
        field_hints = get_type_hints(annotation, include_extras=True)
        names = []
        for item in fields(annotation):
            default = item.default_factory() if item.default is MISSING else item.default  # type: ignore[misc]
            parameters.append(
                inspect.Parameter(
                    item.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=_in_panel(field_hints[item.name], panel),
                )
            )
            names.append(item.name)
        groups[parameter.name] = (annotation, names)
    seen = [parameter.name for parameter in parameters]
    twice = sorted({name for name in seen if seen.count(name) > 1})
    if twice:
        raise TypeError(f"{command.__qualname__}: options {twice} are declared by more than one group")

    @functools.wraps(command)
    def spread(**values: Any) -> None:
        for name, (group, names) in groups.items():
            values[name] = group(**{field_name: values.pop(field_name) for field_name in names})
        command(**values)

    spread.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    spread.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return spread


@option_group("Env")
@dataclass(frozen=True, slots=True)
class EnvOptions:
    """How the env is built: constructor kwargs, where its data lives, the credentials it asks for."""

    env_arg: EnvArgs = field(default_factory=list)
    data_dirs: DataDirs = field(default_factory=list)
    auth: AuthBindings = field(default_factory=list)

    def kwargs(self) -> dict[str, Any]:
        return parse_env_args(self.env_arg)

    @property
    def data_dir(self) -> Path | None:
        """The one env's data directory (a mixture's, one per env, are read by ``mix_spec``)."""
        if len(self.data_dirs) > 1:
            raise typer.BadParameter(
                "is given more than once: a run of one env reads one data directory "
                "(NAME:DIR, once per env, is for a mixture of envs)",
                param_hint="--data-dir",
            )
        return Path(self.data_dirs[0]) if self.data_dirs else None

    def providers(self) -> dict[str, EnvironmentKeyAuth]:
        return parse_auth(self.auth)


@option_group("Run")
@dataclass(frozen=True, slots=True)
class RunOptions:
    """What is run, how much of it at once, where it is kept and when it counts as passed or failed."""

    split: Annotated[Literal["train", "eval"], typer.Option(help="Which dataset split to run.")] = "eval"
    max_examples: Annotated[int | None, typer.Option(min=1, help="Use at most N examples.")] = None
    group_size: Annotated[int, typer.Option(min=1, help="Rollouts per example (siblings).")] = 1
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, help=f"Rollouts in flight at once \\[default: {DEFAULT_CONCURRENCY}; on --resume: the stored value]."
        ),
    ] = None
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Rollouts per zero-fill batch (a multiple of --group-size; default: the whole run)."),
    ] = None
    run_dir: Annotated[
        Path | None, typer.Option(metavar="DIR", help="Where to keep the run (default: runs/NAME-TIME).")
    ] = None
    resume: Annotated[Path | None, typer.Option(metavar="RUN_DIR", help="Continue the run kept in this directory.")] = (
        None
    )
    pass_threshold: Annotated[float, typer.Option(help="A rollout passes when its total reward reaches this.")] = 1.0
    max_failure_rate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="RATE",
            help="Share of rollouts that may fail operationally before the run counts as failed (exit 1).",
        ),
    ] = DEFAULT_MAX_FAILURE_RATE
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show live progress.")] = True


@option_group("Model endpoint")
@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """Which model answers: its server (or the embedded one), its name and its key."""

    base_url: Annotated[
        list[str] | None,
        typer.Option(
            metavar="URL",
            help="OpenAI-compatible endpoint (.../v1); give it again for each replica of the model (requests are "
            "spread over them); omit to run the embedded SmolLM2 model.",
            show_default=False,
        ),
    ] = None
    model: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Model name sent to the server (default: the one model the server lists at /models).",
        ),
    ] = None
    model_check: Annotated[
        bool,
        typer.Option(
            "--model-check/--no-model-check",
            help="Refuse a --model the server's /models does not list (aliases of listed names pass: see "
            "docs/reliability.md); --no-model-check for a gateway whose list is partial.",
        ),
    ] = True
    api_key_env: Annotated[
        str | None, typer.Option(metavar="VAR", help="Environment variable holding the API key.")
    ] = None


@option_group("Sampling")
@dataclass(frozen=True, slots=True)
class SamplingOptions:
    """What every model request asks for; unset values are left to the server."""

    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default: the server's).")] = None
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Tokens per model turn (default: the server's).")] = None
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling top_p (default: the server's).")] = None
    seed: Annotated[int | None, typer.Option(help="Sampling seed; sibling k gets seed + k.")] = None
    extra_body: Annotated[
        str | None, typer.Option(metavar="JSON", help="JSON object merged into every request body.")
    ] = None

    def params(self) -> SamplingParams:
        """The sampling parameters; ``--extra-body`` that is not a JSON object is a usage error."""
        try:
            body = json.loads(self.extra_body) if self.extra_body else {}
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from None
        if not isinstance(body, dict):
            raise typer.BadParameter("must be a JSON object", param_hint="--extra-body")
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens, seed=self.seed, extra_body=body
        )


@option_group("Limits")
@dataclass(frozen=True, slots=True)
class LimitOptions:
    """Time and size bounds of each request, tool call, env turn and rollout, and the load on an endpoint."""

    request_timeout: Annotated[float, typer.Option(min=0.001, metavar="SECONDS", help="Seconds per model request.")] = (
        600.0
    )
    tool_timeout: Annotated[float, typer.Option(min=0.001, metavar="SECONDS", help="Seconds per tool call.")] = 300.0
    env_response_timeout: Annotated[
        float,
        typer.Option(min=0.001, metavar="SECONDS", help="Seconds per env turn (an env's env_response)."),
    ] = _DEFAULT_ENGINE.env_response_timeout or 300.0
    rollout_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.001, metavar="SECONDS", help="Seconds per rollout (waits for a down endpoint do not count)."
        ),
    ] = None
    max_outage: Annotated[
        float,
        typer.Option(
            min=0.001,
            metavar="SECONDS",
            help="Seconds a model endpoint (every replica, with several) may stay down while its rollouts wait; "
            "past it the run stops, resumable.",
        ),
    ] = _DEFAULT_ENGINE.max_outage
    max_requests: Annotated[
        int,
        typer.Option(
            min=1,
            help="Model requests in flight per endpoint, shared by all rollouts (at most: fewer while this "
            "process's event loop is saturated and more would only wait for it).",
        ),
    ] = _DEFAULT_ENGINE.max_requests
    max_content_chars: Annotated[
        int, typer.Option(min=1, help="Model text kept and sent back per message (longer is cut, marked).")
    ] = _DEFAULT_ENGINE.max_content_chars
    max_tool_result_chars: Annotated[
        int, typer.Option(min=1, help="Tool result text kept and sent per call (longer is cut, marked).")
    ] = _DEFAULT_ENGINE.max_tool_result_chars

    def engine(self) -> EngineConfig:
        return EngineConfig(
            request_timeout=self.request_timeout,
            tool_timeout=self.tool_timeout,
            env_response_timeout=self.env_response_timeout,
            rollout_timeout=self.rollout_timeout,
            max_requests=self.max_requests,
            max_content_chars=self.max_content_chars,
            max_tool_result_chars=self.max_tool_result_chars,
            max_outage=self.max_outage,
        )


@option_group("Telemetry")
@dataclass(frozen=True, slots=True)
class TelemetryOptions:
    """OpenTelemetry traces of the rollouts, sent to an OTLP/HTTP collector (docs/telemetry.md)."""

    otel_endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Send one trace per rollout over OTLP/HTTP to URL (http://HOST:4318; /v1/traces is added). "
            "Default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT, else off.",
            show_default=False,
        ),
    ] = None
    otel_content: Annotated[
        bool,
        typer.Option(
            "--otel-content/--no-otel-content",
            help="Put prompts, completions and tool arguments/results on the spans (off: they may be private).",
        ),
    ] = False

    def settings(self) -> TelemetrySettings:
        try:
            return TelemetrySettings(endpoint=self.otel_endpoint, content=self.otel_content)
        except TelemetryError as exc:
            raise typer.BadParameter(str(exc), param_hint="--otel-endpoint") from None


@option_group("Cache and cost")
@dataclass(frozen=True, slots=True)
class CacheOptions:
    """Replies answered from a response cache, the price table, and a spending ceiling."""

    cache: Annotated[
        str | None,
        typer.Option(
            metavar="DIR|off",
            help="Answer repeated model requests from a response cache in DIR (off unless given: see "
            "docs/cost-and-cache.md) \\[on --resume: the stored choice].",
            show_default=False,
        ),
    ] = None
    cache_judge: Annotated[
        bool, typer.Option("--cache-judge/--no-cache-judge", help="With --cache: also cache LLM-judge calls.")
    ] = True
    cache_unseeded: Annotated[
        Literal["per-rollout", "skip"],
        typer.Option(
            help="With --cache: requests that sample without a seed are cached per rollout (a re-run replays "
            "each rollout's own draw) or never (skip)."
        ),
    ] = "per-rollout"
    cache_max_mb: Annotated[
        int, typer.Option(min=1, help="With --cache: MB of stored replies kept; the least recently used go first.")
    ] = DEFAULT_MAX_BYTES // 2**20
    prices: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help=f"A price table (TOML, USD per 1M tokens) over the shipped one (default: ${PRICES_ENV}).",
            show_default=False,
        ),
    ] = None
    max_cost: Annotated[
        float | None,
        typer.Option(metavar="USD", help="Stop the run (resumable) once its model calls cost this many US dollars."),
    ] = None

    def settings(self) -> CacheSettings | None:
        return cache_settings(
            self.cache, judge=self.cache_judge, unseeded=self.cache_unseeded, max_mb=self.cache_max_mb
        )


@option_group("Executor")
@dataclass(frozen=True, slots=True)
class ExecutorOptions:
    """Where groups run: in this process, or on Ray actors."""

    executor: Annotated[Literal["local", "ray"], typer.Option(help="Where groups run.")] = "local"
    ray_address: Annotated[
        str | None, typer.Option(metavar="ADDRESS", help="auto or ray://host:port (with --executor ray).")
    ] = None
    workers: Annotated[int | None, typer.Option(min=1, help="Ray actors (with --executor ray).")] = None


def cache_settings(
    value: str | None,
    *,
    judge: bool = True,
    unseeded: str = "per-rollout",
    max_mb: int = DEFAULT_MAX_BYTES // 2**20,
) -> CacheSettings | None:
    """``--cache DIR`` (``off``, or not given: no cache)."""
    if value is None or value.strip().lower() == "off":
        return None
    if not value.strip():
        raise typer.BadParameter("give a directory, or off", param_hint="--cache")
    directory = Path(value).expanduser()
    if directory.exists() and not directory.is_dir():
        raise typer.BadParameter(f"{directory} is a file; give a directory for the cache", param_hint="--cache")
    return CacheSettings(directory, max_bytes=max_mb * 2**20, judge=judge, unseeded=unseeded)  # type: ignore[arg-type]
