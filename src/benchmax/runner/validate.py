"""``benchmax validate``: every problem of an env, each with its location, before a real run."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from benchmax.engine.engine import Engine, EngineConfig
from benchmax.engine.tools import validate_tools
from benchmax.envs.base_env import BaseEnv, check_env_definition
from benchmax.envs.dataset import to_example
from benchmax.envs.errors import DatasetError, EnvDefinitionError
from benchmax.envs.identity import canonical_json
from benchmax.envs.rollout import RolloutRequest, StaticBearerAuth
from benchmax.envs.termination import is_scorable
from benchmax.envs.types import SPLITS, Example
from benchmax.runner.env_spec import EnvSpec, EnvSpecError


@dataclass(frozen=True, slots=True)
class Problem:
    where: str
    message: str


@dataclass(slots=True)
class Report:
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))


async def validate_env(
    spec: EnvSpec,
    *,
    data_dir: Path | None = None,
    max_examples: int = 5,
    base_url: str | None = None,
    model: str = "default",
    api_key_env: str | None = None,
) -> Report:
    """Load, build both splits, check payloads and tools, optionally run one group."""
    report = Report()
    try:
        cls = spec.load_class()
    except EnvSpecError as exc:
        report.problem(spec.spec, str(exc))
        return report
    source = getattr(sys.modules.get(cls.__module__), "__file__", None)
    where = f"{source}:{cls.__qualname__}" if source else f"{cls.__module__}.{cls.__qualname__}"
    try:
        env = cls(**dict(spec.kwargs))
    except EnvDefinitionError as exc:
        report.problem(where, str(exc))
        return report
    except Exception as exc:
        report.problem(where, f"constructing it raised {type(exc).__name__}: {exc}")
        return report
    report.notes.append(f"loaded {where}")
    try:
        if isinstance(env, BaseEnv):
            await _check_base_env(env, where, report)
        base_dir = Path(data_dir or spec.directory or Path.cwd())
        examples: dict[str, list[Example]] = {}
        for split in SPLITS:
            examples[split] = await _check_split(env, split, base_dir, max_examples, where, report)
        if base_url and isinstance(env, BaseEnv) and report.ok:
            sample = (examples.get("eval") or examples.get("train") or [None])[0]
            if sample is not None:
                await _check_group(env, sample, base_url, model, api_key_env, where, report)
    finally:
        try:
            await env.aclose()
        except Exception as exc:
            report.problem(f"{where}.aclose", f"raised {type(exc).__name__}: {exc}")
    return report


async def _check_base_env(env: BaseEnv, where: str, report: Report) -> None:
    try:
        check_env_definition(env)
    except EnvDefinitionError as exc:
        report.problem(where, str(exc))
    try:
        tools = validate_tools(await env.list_tools(), owner=type(env).__name__)
        report.notes.append(f"{len(tools)} tools: {', '.join(tools) or 'none'}")
    except EnvDefinitionError as exc:
        report.problem(f"{where}.list_tools", str(exc))
    except Exception as exc:
        report.problem(f"{where}.list_tools", f"raised {type(exc).__name__}: {exc}")


async def _check_split(
    env: BaseEnv | object, split: str, base_dir: Path, max_examples: int, where: str, report: Report
) -> list[Example]:
    try:
        dataset = await env.create_dataset(split, base_dir, max_examples=max_examples)  # type: ignore[attr-defined]
    except DatasetError as exc:
        report.problem(f"{where}.create_dataset({split!r})", str(exc))
        return []
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        report.problem(
            f"{where}.create_dataset({split!r})",
            f"raised {type(exc).__name__}: {exc} (at {frame.filename}:{frame.lineno})",
        )
        return []
    examples = []
    seen: set[str] = set()
    try:
        for index, item in enumerate(dataset):
            if index >= max_examples:
                break
            label = f"{split}[{index}]"
            try:
                example = to_example(item, where=label)
                canonical_json(dict(example.payload))
            except DatasetError as exc:
                report.problem(where, str(exc))
                continue
            except TypeError as exc:
                report.problem(where, f"{label}: payload is not JSON-serialisable ({exc})")
                continue
            if example.id in seen:
                report.problem(where, f"{label}: duplicate example id {example.id!r}")
            seen.add(example.id)
            examples.append(example)
    except Exception as exc:
        report.problem(f"{where}.create_dataset({split!r})", f"iterating it raised {type(exc).__name__}: {exc}")
    if not examples and not any(p.where.endswith(f"({split!r})") for p in report.problems):
        report.problem(f"{where}.create_dataset({split!r})", "the split is empty")
    report.notes.append(f"{split}: {len(examples)} examples checked")
    return examples


async def _check_group(
    env: BaseEnv,
    example: Example,
    base_url: str,
    model: str,
    api_key_env: str | None,
    where: str,
    report: Report,
) -> None:
    auth = StaticBearerAuth.from_env(api_key_env) if api_key_env else None
    engine = Engine(env, EngineConfig(request_timeout=120))
    try:
        requests = [
            RolloutRequest(f"validate#{index}", example, model, base_url, auth, "eval") for index in range(2)
        ]
        result = await engine.run_group(requests)
    finally:
        await engine.aclose()
    for outcome in result.outcomes:
        if is_scorable(outcome.termination_reason):
            report.notes.append(
                f"{outcome.rollout_id}: {outcome.termination_reason}, rewards {dict(outcome.rewards)}"
            )
        else:
            report.problem(
                f"{where} rollout {outcome.rollout_id}",
                f"{outcome.termination_reason}: {outcome.error}",
            )
