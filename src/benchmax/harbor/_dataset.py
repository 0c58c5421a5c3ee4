"""A Harbor dataset resolved into a fixed, content-addressed snapshot of benchmax examples.

Each task directory is copied once under ``base_dir/tasks/<sha256>`` and its
example id is that content hash (Harbor's own ``Packager`` digest), so the order
of the source, the machine's paths and re-downloads change nothing: the same
task is the same example, in resumes, diffs and train/eval splits. Package
datasets whose manifest already names each task's digest are ordered, split and
limited before anything is downloaded.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from benchmax.envs import DatasetError, Example, ListDataset
from benchmax.harbor._deps import require_harbor

if TYPE_CHECKING:
    from harbor.models.job.config import DatasetConfig

logger = logging.getLogger(__name__)

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_DOWNLOAD_ATTEMPTS = 3


def check_eval_ratio(eval_ratio: object) -> float:
    if isinstance(eval_ratio, bool) or not isinstance(eval_ratio, (int, float)) or not math.isfinite(eval_ratio):
        raise ValueError(f"eval_ratio must be a number with 0 <= eval_ratio < 1, got {eval_ratio!r}")
    if not 0 <= eval_ratio < 1:
        raise ValueError(f"eval_ratio must satisfy 0 <= eval_ratio < 1, got {eval_ratio!r}")
    return float(eval_ratio)


def eval_count(size: int, eval_ratio: float) -> int:
    """How many of ``size`` sorted examples form the eval holdout: at least one, never all."""
    if eval_ratio == 0 or size < 2:
        return 0
    return min(size - 1, max(1, math.ceil(size * eval_ratio)))


def _select(items: list[Any], split: str, eval_ratio: float) -> list[Any]:
    count = eval_count(len(items), eval_ratio)
    if split == "eval":
        if count == 0:
            if eval_ratio == 0:
                raise ValueError("HarborEnv's automatic eval split is off (eval_ratio=0); pass eval_dataset=...")
            raise ValueError("HarborEnv's automatic eval split needs at least two tasks in the dataset")
        return items[:count]
    return items[count:]


class HarborDataset(ListDataset):
    """Examples whose payload names a task snapshot (``task_path``) and carries its instruction as the prompt."""

    @classmethod
    async def create(
        cls,
        config: DatasetConfig,
        *,
        base_dir: Path,
        disable_verification: bool = False,
        max_examples: int | None = None,
        split: str | None = None,
        eval_ratio: float | None = None,
    ) -> HarborDataset:
        """Resolve ``config`` (local directory, package, registry or git) and freeze it under ``base_dir``."""
        require_harbor()
        from harbor.models.job.config import DatasetConfig
        from harbor.models.task.id import PackageTaskId
        from harbor.publisher.packager import Packager

        if not isinstance(config, DatasetConfig):
            raise TypeError(f"a Harbor dataset must be a harbor DatasetConfig, got {type(config).__name__}")
        if max_examples is not None and (
            isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1
        ):
            raise ValueError(f"max_examples must be a positive integer, got {max_examples!r}")
        if split not in (None, "train", "eval"):
            raise ValueError(f"unknown Harbor dataset split {split!r}; use 'train' or 'eval'")
        if (split is None) != (eval_ratio is None):
            raise ValueError("a Harbor split and its eval_ratio come together")
        ratio = check_eval_ratio(eval_ratio) if eval_ratio is not None else 0.0

        root = Path(base_dir).expanduser().resolve()
        downloads, tasks = root / "downloads", root / "tasks"
        downloads.mkdir(parents=True, exist_ok=True)
        tasks.mkdir(parents=True, exist_ok=True)
        resolved = config.model_copy(deep=True, update={"download_dir": downloads})
        configs = await resolved.get_task_configs(disable_verification=disable_verification)
        if not configs:
            raise DatasetError(f"the Harbor dataset {config!r} resolved to no tasks")

        manifest = [_manifest_digest(task.get_task_id(), PackageTaskId) for task in configs]
        decided_early = all(digest is not None for digest in manifest)
        if decided_early:
            pairs = sorted(zip(configs, manifest, strict=True), key=lambda pair: str(pair[1]))
            if split is not None:
                pairs = _select(pairs, split, ratio)
            if max_examples is not None:
                pairs = pairs[:max_examples]
            configs = [task for task, _ in pairs]

        paths = await _local_paths(configs, downloads, overwrite=resolved.overwrite)
        examples: list[Example] = []
        for task, path in zip(configs, paths, strict=True):
            digest, _ = await asyncio.to_thread(Packager.compute_content_hash, path)
            if any(example.id == digest for example in examples):
                raise DatasetError(f"the Harbor dataset holds the same task content twice ({digest})")
            snapshot = tasks / digest
            await asyncio.to_thread(_snapshot, path, snapshot, digest, Packager)
            instruction = (
                (snapshot / "instruction.md").read_text(encoding="utf-8")
                if (snapshot / "instruction.md").is_file()
                else ""
            )
            payload = {
                "prompt_messages": [{"role": "user", "content": instruction or f"(Harbor task {path.name})"}],
                "task_path": str(snapshot),
                "task_name": path.name,
                "source": task.source,
            }
            examples.append(Example(digest, payload))
        examples.sort(key=lambda example: example.id)
        if decided_early:
            expected = {str(digest) for digest in manifest if digest is not None}
            got = {example.id for example in examples}
            if not got <= expected:
                raise DatasetError(f"Harbor task content does not match its package manifest: {sorted(got - expected)}")
        else:
            if split is not None:
                examples = _select(examples, split, ratio)
            if max_examples is not None:
                examples = examples[:max_examples]
        return cls(examples)

    def train_eval_split(self, eval_ratio: float) -> tuple[HarborDataset, HarborDataset]:
        """Complementary, deterministic train and eval views (by content hash)."""
        ratio = check_eval_ratio(eval_ratio)
        examples = sorted(self, key=lambda example: example.id)
        count = eval_count(len(examples), ratio)
        return HarborDataset(examples[count:]), HarborDataset(examples[:count])


def _manifest_digest(task_id: Any, package_type: type) -> str | None:
    if not isinstance(task_id, package_type) or getattr(task_id, "ref", None) is None:
        return None
    digest = str(task_id.ref).removeprefix("sha256:").lower()
    return digest if _DIGEST.fullmatch(digest) else None


async def _local_paths(configs: list[Any], downloads: Path, *, overwrite: bool) -> list[Path]:
    """Local tasks as they are; everything else through Harbor's TaskClient, retried on a failed batch."""
    remote = [task for task in configs if task.path is None or not Path(task.path).is_dir()]
    fetched: dict[int, Path] = {}
    if remote:
        from harbor.tasks.client import TaskClient

        client = TaskClient()
        ids = [task.get_task_id() for task in remote]
        for attempt in range(1, _DOWNLOAD_ATTEMPTS + 1):
            try:
                result = await client.download_tasks(ids, overwrite=overwrite, output_dir=downloads)
                break
            except ExceptionGroup:
                if attempt == _DOWNLOAD_ATTEMPTS:
                    raise
                logger.warning("Harbor task download failed; retrying (%d/%d)", attempt + 1, _DOWNLOAD_ATTEMPTS)
                await asyncio.sleep(2 ** (attempt - 1))
        for task, item in zip(remote, result.results, strict=True):
            fetched[id(task)] = Path(item.path)
    return [fetched.get(id(task)) or Path(task.path) for task in configs]


def _snapshot(source: Path, destination: Path, digest: str, packager: Any) -> None:
    """Copy once, atomically; then check the copy still hashes to ``digest``."""
    if not destination.exists():
        staging = destination.parent / f".{destination.name}.{uuid4().hex}.tmp"
        try:
            shutil.copytree(source, staging)
            try:
                staging.rename(destination)
            except OSError:
                if not destination.exists():
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging)
    actual, _ = packager.compute_content_hash(destination)
    if actual != digest:
        raise DatasetError(f"Harbor task snapshot {destination} changed while copied: {actual} != {digest}")
