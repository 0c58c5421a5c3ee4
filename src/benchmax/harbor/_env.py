"""``HarborEnv``: Harbor tasks (agent + sandbox + verifier) as benchmax rollouts.

Configured with Harbor's own models (``DatasetConfig``, ``AgentConfig``,
``EnvironmentConfig``, ``VerifierConfig``) exactly as in benchmax 0.2.5. Each
rollout is one Harbor trial: the configured agent works on the task in the
configured environment, Harbor's verifier scores it, and the verifier's reward
components become the rollout's rewards. The environment type is Harbor's
choice, passed through unchanged (Docker, Modal, Daytona, E2B, ...); with
``EnvironmentConfig(import_path=LOCAL_SANDBOX)`` trials run in benchmax's local
bubblewrap sandbox, so no daemon or cloud account is needed.

The rollout's model endpoint reaches the agent as ``OPENAI_BASE_URL`` /
``OPENAI_API_KEY`` and the model as ``openai/<model>`` (LiteLLM's route for an
OpenAI-compatible server); the verifier gets only its own configured env.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchmax.envs import DatasetSplit, Environment, RolloutOutcome, RolloutRequest, TerminationReason
from benchmax.harbor._bundled_agent import BundledHarborAgent
from benchmax.harbor._credentials import SandboxCredentials, sandbox_credentials_scope
from benchmax.harbor._dataset import HarborDataset, check_eval_ratio
from benchmax.harbor._deps import require_harbor
from benchmax.harbor._types import HarborTrialTemplate

if TYPE_CHECKING:
    from harbor.models.job.config import DatasetConfig
    from harbor.models.trial.config import AgentConfig
    from harbor.models.trial.result import TrialResult

logger = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MODAL_DEFAULTS = {"app_name": "harbor-benchmax", "sandbox_timeout_secs": 10800, "sandbox_idle_timeout_secs": 1800}
_REASON_BY_EXCEPTION = {
    "AgentTimeoutError": "harness_timeout",
    "ContextLengthExceededError": TerminationReason.CONTEXT_EXCEEDED,
    "ContextWindowExceededError": TerminationReason.CONTEXT_EXCEEDED,
    "NonZeroAgentExitCodeError": TerminationReason.HARNESS_ERROR,
    "OutputLengthExceededError": TerminationReason.OUTPUT_EXCEEDED,
    "SandboxBuildFailedError": TerminationReason.SANDBOX_ERROR,
    "VerifierTimeoutError": "verifier_timeout",
}
_SELF_REPORTED = frozenset({"context_exceeded", "output_exceeded", "max_turns_exceeded", "tool_budget_exceeded"})
_TRAINER_OWNED = frozenset({"temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty", "seed", "stop"})
_OUTPUT_CAPS = frozenset({"max_tokens", "max_completion_tokens"})
_UNSUPPORTED = frozenset(
    {
        "best_of", "do_sample", "function_call", "functions", "grammar", "max_new_tokens", "min_p", "min_tokens",
        "num_beams", "prediction", "reasoning_effort", "repetition_penalty", "typical_p", "verbosity",
        "web_search_options",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class HarborDiagnostic:
    """One finding of :meth:`HarborEnv.validation_diagnostics` about the harness's model controls."""

    severity: Literal["error", "warning"]
    code: str
    location: str
    message: str


class HarborEnv(Environment):
    """Runs Harbor trials as rollouts. ``eval_dataset`` wins over ``eval_ratio`` for the eval split."""

    def __init__(
        self,
        *,
        dataset: DatasetConfig,
        trial: HarborTrialTemplate,
        sandbox_credentials: SandboxCredentials | None = None,
        eval_dataset: DatasetConfig | None = None,
        eval_ratio: float = 0.1,
        max_concurrent_trials: int | None = None,
        requires_public_model_endpoint: bool = True,
    ) -> None:
        require_harbor()
        _validate(dataset, eval_dataset, trial, sandbox_credentials, eval_ratio, max_concurrent_trials)
        self._dataset = dataset.model_copy(deep=True)
        self._eval_dataset = eval_dataset.model_copy(deep=True) if eval_dataset is not None else None
        self._eval_ratio = check_eval_ratio(eval_ratio)
        self._trial = _with_provider_defaults(trial)
        self._credentials = sandbox_credentials
        self._requires_public_model_endpoint = bool(requires_public_model_endpoint)
        self._max_trials = max_concurrent_trials
        self._slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._datasets: dict[tuple[Path, str | None, int | None], HarborDataset] = {}

    @property
    def requires_public_model_endpoint(self) -> bool:
        """Whether the agent needs a model URL reachable from a remote sandbox (not just loopback)."""
        return self._requires_public_model_endpoint

    def validation_diagnostics(self) -> tuple[HarborDiagnostic, ...]:
        """Harness model controls that conflict with training: trainer-owned sampling, unsupported knobs."""
        agent = self._trial.agent
        config = agent.config if isinstance(agent, BundledHarborAgent) else agent
        kwargs = getattr(config, "kwargs", None)
        if not isinstance(kwargs, Mapping):
            return ()
        found = []
        for location, name, value in _walk(kwargs, "agent.kwargs"):
            if name in _OUTPUT_CAPS:
                found.append(
                    HarborDiagnostic(
                        "warning",
                        "harness_output_cap",
                        location,
                        f"{location} caps the harness's output; a trainer may clamp it",
                    )
                )
            elif name in _TRAINER_OWNED:
                found.append(
                    HarborDiagnostic(
                        "error",
                        "trainer_owned_model_control",
                        location,
                        f"{location} is the trainer's to set, not the harness's",
                    )
                )
            elif _unsupported(name, value):
                found.append(
                    HarborDiagnostic(
                        "error",
                        "unsupported_model_control",
                        location,
                        f"{location}={value!r} is not supported for tracked training",
                    )
                )
        return tuple(found)  # fmt: skip

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> HarborDataset:
        if split not in ("train", "eval"):
            raise ValueError(f"unknown dataset split {split!r}; use 'train' or 'eval'")
        if self._eval_dataset is not None:
            config = self._dataset if split == "train" else self._eval_dataset
            return await self._resolve(config, Path(base_dir) / split, max_examples=max_examples)
        if max_examples is not None:
            return await self._resolve(self._dataset, Path(base_dir) / "main", split=split, max_examples=max_examples)
        complete = await self._resolve(self._dataset, Path(base_dir) / "main")
        train, held_out = complete.train_eval_split(self._eval_ratio)
        if split == "eval" and not len(held_out):
            if self._eval_ratio == 0:
                raise ValueError("HarborEnv's automatic eval split is off (eval_ratio=0); pass eval_dataset=...")
            raise ValueError("HarborEnv's automatic eval split needs at least two tasks in the dataset")
        return train if split == "train" else held_out

    async def _resolve(
        self, config: DatasetConfig, snapshot: Path, *, split: str | None = None, max_examples: int | None = None
    ) -> HarborDataset:
        key = (snapshot.expanduser().resolve(), split, max_examples)
        if key not in self._datasets:
            self._datasets[key] = await HarborDataset.create(
                config,
                base_dir=key[0],
                disable_verification=bool(self._trial.verifier.disable),
                split=split,
                eval_ratio=self._eval_ratio if split is not None else None,
                max_examples=max_examples,
            )
        return self._datasets[key]

    async def run_group(self, requests: Sequence[RolloutRequest]) -> dict[str, RolloutOutcome]:
        async with sandbox_credentials_scope(self._credentials):
            return await super().run_group(requests)

    async def run_rollout(self, request: RolloutRequest) -> RolloutOutcome:
        if self._max_trials is None:
            return await self._run_trial(request)
        loop = asyncio.get_running_loop()
        slots = self._slots.setdefault(loop, asyncio.Semaphore(self._max_trials))
        async with slots:
            return await self._run_trial(request)

    async def _run_trial(self, request: RolloutRequest) -> RolloutOutcome:
        started = time.time()
        async with sandbox_credentials_scope(self._credentials):
            from harbor.models.trial.config import TaskConfig, TrialConfig
            from harbor.trial.trial import Trial

            payload = request.example.payload
            task_path = payload.get("task_path")
            if not isinstance(task_path, str):
                raise TypeError("a HarborEnv example's payload needs 'task_path' (made by HarborEnv.create_dataset)")
            trial_name = _trial_name(request.rollout_id)
            agent = _agent_for(self._trial.agent, request)
            config = TrialConfig(
                task=TaskConfig(path=Path(task_path), source=payload.get("source")),
                trial_name=trial_name,
                trials_dir=self._trial.trials_dir,
                timeout_multiplier=self._trial.timeout_multiplier,
                agent_timeout_multiplier=self._trial.agent_timeout_multiplier,
                verifier_timeout_multiplier=self._trial.verifier_timeout_multiplier,
                agent_setup_timeout_multiplier=self._trial.agent_setup_timeout_multiplier,
                environment_build_timeout_multiplier=self._trial.environment_build_timeout_multiplier,
                agent=agent,
                environment=self._trial.environment.model_copy(deep=True),
                verifier=self._trial.verifier.model_copy(deep=True),
                artifacts=list(self._trial.artifacts),
                extra_instruction_paths=list(self._trial.extra_instruction_paths),
            )
            logger.info(
                "harbor trial %s: task=%s sandbox=%s agent=%s model=%s",
                trial_name, payload.get("task_name"), _sandbox_name(self._trial), agent.name or agent.import_path,
                agent.model_name,
            )  # fmt: skip
            try:
                trial = await Trial.create(config)
                result = await trial.run()
            except Exception as error:
                logger.exception("harbor trial %s failed", trial_name)
                rewards: dict[str, float] = {}
                reason = _REASON_BY_EXCEPTION.get(type(error).__name__, "harness_error")
                detail: str | None = f"{type(error).__name__}: {error}"
            else:
                rewards, reason, detail = _settle(result, Path(self._trial.trials_dir) / trial_name)
        logger.info("harbor trial %s: %s %s", trial_name, reason, rewards)
        return RolloutOutcome(
            rewards=rewards,
            termination_reason=reason,
            error=detail,
            rollout_id=request.rollout_id,
            example_id=request.example.id,
            split=request.split,
            messages=[dict(message) for message in payload.get("prompt_messages", [])],
            started_at=started,
            ended_at=time.time(),
            sampling=request.sampling,
        )

    async def aclose(self) -> None:
        """Harbor trials own their sandboxes and stop them themselves."""


def _trial_name(rollout_id: str) -> str:
    """Harbor's trial names allow ``[A-Za-z0-9._-]``; others are replaced and a digest keeps them unique."""
    if _SAFE_NAME.fullmatch(rollout_id):
        return rollout_id
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", rollout_id).lstrip("._-") or "rollout"
    return f"{cleaned[:80]}-{hashlib.sha256(rollout_id.encode()).hexdigest()[:10]}"


def _agent_for(template: Any, request: RolloutRequest) -> AgentConfig:
    """A private copy of the harness config pointed at this rollout's model endpoint."""
    base = template.harbor_config() if isinstance(template, BundledHarborAgent) else template
    headers = request.model_auth.headers() if request.model_auth is not None else {}
    authorization = headers.get("Authorization", "")
    key = authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else "none"
    env = {
        **dict(base.env),
        "OPENAI_API_KEY": key,
        "OPENAI_BASE_URL": request.base_url,
        "OPENAI_API_BASE": request.base_url,  # the name older OpenAI SDKs and some harnesses read
    }
    model = request.model if request.model.startswith("openai/") else f"openai/{request.model}"
    return base.model_copy(deep=True, update={"model_name": model, "env": env})


def _settle(result: TrialResult, trial_dir: Path) -> tuple[dict[str, float], str, str | None]:
    """Rewards, termination reason and error of a finished trial; failures keep no reward."""
    reason = _reason(result)
    verifier = result.verifier_result
    rewards = verifier.rewards if verifier is not None else None
    failure = result.exception_info
    detail = f"{failure.exception_type}: {failure.exception_message}" if failure is not None else None
    if not rewards:
        if failure is None and reason == TerminationReason.FINISHED:
            return {}, "verifier_error", "the verifier returned no rewards"
        return {}, reason, detail or "the verifier returned no rewards"
    if failure is not None:
        return {}, reason, detail
    values = {str(name): float(value) for name, value in rewards.items()}
    if "partial_credit" not in values and "reward" in values:
        credit = _partial_credit(trial_dir)
        if credit is not None:
            values["partial_credit"] = credit
    return values, reason, None


def _reason(result: TrialResult) -> str:
    metadata = getattr(getattr(result, "agent_result", None), "metadata", None)
    if isinstance(metadata, Mapping):
        reported = metadata.get("termination_reason")
        if reported is None and isinstance(metadata.get("harvey_metrics"), Mapping):
            reported = metadata["harvey_metrics"].get("termination_reason")
        if reported in _SELF_REPORTED:
            return str(reported)
        if reported not in (None, TerminationReason.FINISHED):
            logger.warning("harbor harness reported an unknown termination reason %r", reported)
    if result.exception_info is None:
        return TerminationReason.FINISHED
    return _REASON_BY_EXCEPTION.get(result.exception_info.exception_type, TerminationReason.HARNESS_ERROR)


def _partial_credit(trial_dir: Path) -> float | None:
    """Weighted credit from a RewardKit verifier's ``reward-details.json``, when it wrote one."""
    details = trial_dir / "verifier" / "reward-details.json"
    if not details.is_file():
        return None
    try:
        payload = json.loads(details.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("unreadable RewardKit details at %s", details)
        return None
    reward = payload.get("reward", payload) if isinstance(payload, Mapping) else None
    criteria = reward.get("criteria") if isinstance(reward, Mapping) else None
    if not isinstance(criteria, list) or not criteria:
        return None
    total = earned = 0.0
    for criterion in criteria:
        if not isinstance(criterion, Mapping):
            return None
        weight, value = criterion.get("weight", 1.0), criterion.get("value", 0.0)
        numbers = (weight, value)
        if any(isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) for n in numbers):
            return None
        if weight < 0:
            return None
        total += float(weight)
        earned += float(weight) * float(value)
    return earned / total if total > 0 else None


def _walk(value: Mapping[str, Any], prefix: str) -> list[tuple[str, str, Any]]:
    found = []
    for name, child in value.items():
        location = f"{prefix}.{name}"
        found.append((location, str(name), child))
        if isinstance(child, Mapping):
            found.extend(_walk(child, location))
    return found


def _unsupported(name: str, value: Any) -> bool:
    if name == "return_routed_experts":
        return True
    if name in _UNSUPPORTED:
        return value is not None
    allowed = {
        "n": (None, 1),
        "tool_choice": (None, "auto"),
        "logprobs": (None, False),
        "parallel_tool_calls": (None, True),
        "response_format": (None, {}, {"type": "text"}),
        "logit_bias": (None, {}),
    }
    if name == "top_logprobs":
        return value is not None
    return name in allowed and value not in allowed[name]


def _sandbox_name(trial: HarborTrialTemplate) -> str:
    environment = trial.environment
    if environment.import_path:
        return environment.import_path
    return str(getattr(environment.type, "value", environment.type))


def _with_provider_defaults(trial: HarborTrialTemplate) -> HarborTrialTemplate:
    """Modal sandboxes get benchmax's app name and timeouts unless the user set them."""
    from harbor.models.environment_type import EnvironmentType

    if trial.environment.type != EnvironmentType.MODAL:
        return trial
    kwargs = {**_MODAL_DEFAULTS, **dict(trial.environment.kwargs)}
    return replace(trial, environment=trial.environment.model_copy(deep=True, update={"kwargs": kwargs}))


def _validate(
    dataset: object,
    eval_dataset: object,
    trial: object,
    credentials: object,
    eval_ratio: object,
    max_concurrent_trials: object,
) -> None:
    """Check the whole configuration at construction, naming the field and the fix."""
    from harbor.models.job.config import DatasetConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

    if not isinstance(dataset, DatasetConfig):
        raise TypeError(f"dataset must be a Harbor DatasetConfig, got {type(dataset).__name__}")
    if eval_dataset is not None and not isinstance(eval_dataset, DatasetConfig):
        raise TypeError(f"eval_dataset must be a Harbor DatasetConfig, got {type(eval_dataset).__name__}")
    if not isinstance(trial, HarborTrialTemplate):
        raise TypeError(f"trial must be a HarborTrialTemplate, got {type(trial).__name__}")
    if not isinstance(trial.agent, (AgentConfig, BundledHarborAgent)):
        raise TypeError("trial.agent must be a Harbor AgentConfig or a BundledHarborAgent")
    agent = trial.agent.config if isinstance(trial.agent, BundledHarborAgent) else trial.agent
    if agent.model_name:
        raise ValueError(
            "trial.agent.model_name must be unset: each rollout serves the requested model, routed as openai/<model>"
        )
    if agent.n_concurrent is not None or agent.concurrency_group is not None:
        raise ValueError(
            "trial.agent.n_concurrent and concurrency_group belong to Harbor's job queue; benchmax schedules "
            "rollouts, so leave them unset (use max_concurrent_trials)"
        )
    if not isinstance(trial.environment, EnvironmentConfig):
        raise TypeError("trial.environment must be a Harbor EnvironmentConfig")
    if not isinstance(trial.verifier, VerifierConfig):
        raise TypeError("trial.verifier must be a Harbor VerifierConfig")
    if trial.verifier.disable:
        raise ValueError("HarborEnv needs the verifier enabled: its rewards are the rollout's rewards")
    check_eval_ratio(eval_ratio)
    if credentials is not None and not isinstance(credentials, SandboxCredentials):
        raise TypeError(f"sandbox_credentials must be SandboxCredentials, got {type(credentials).__name__}")
    if max_concurrent_trials is not None and (
        isinstance(max_concurrent_trials, bool)
        or not isinstance(max_concurrent_trials, int)
        or max_concurrent_trials < 1
    ):
        raise ValueError(f"max_concurrent_trials must be a positive integer or None, got {max_concurrent_trials!r}")
    environment = trial.environment
    if environment.import_path is None and environment.type is not None:
        provider = str(getattr(environment.type, "value", environment.type))
        if provider in ("modal", "daytona") and credentials is None:
            raise ValueError(f"the Harbor {provider!r} sandbox needs sandbox_credentials (e.g. ModalCredentials)")
        wanted = getattr(credentials, "provider", None)
        if wanted is not None and wanted != provider:
            raise ValueError(f"{wanted!r} sandbox credentials do not match the configured {provider!r} sandbox")
