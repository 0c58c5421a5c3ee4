"""SkyRL-Gym envs as benchmax envs: ``skyrl-gym:ENV_ID`` with its rows.

A SkyRL-Gym env is made per episode from a dataset row (``prompt``, ``env_class``,
``reward_spec``, ``extra_info``, ...): ``skyrl_gym.make(ENV_ID, env_config=..., extras=row)``,
then ``init(prompt)`` gives the chat the model starts from and ``step(answer)`` the reward.
The adapter does the same: each row is an example whose ``prompt_messages`` are what
``init`` returns, and ``compute_reward`` makes a fresh env from the row, calls ``init`` and
``step`` with the model's answer, and records ``step``'s reward as the ``reward`` component,
exactly as SkyRL's generator does for a one-step episode.

Rows come from ``rows`` (a ``.jsonl`` or ``.parquet`` file, or one per split:
``{"train": ..., "eval": ...}``), else from ``train``/``eval`` (or ``validation``) files in
the data directory. An env that is not one of SkyRL-Gym's own is registered by a module of
yours: ``--env-arg module=my_envs`` imports it first.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from benchmax.adapters._extras import require
from benchmax.envs import BaseEnv, BaseRollout, DatasetError, DatasetSplit, EnvSpecError, ListDataset, content_text

PREFIX = "skyrl-gym:"
_SPLIT_FILES = {"train": ("train",), "eval": ("eval", "validation", "test")}
_ROW_KEYS = ("prompt", "env_class")
"""What SkyRL's dataset reads itself; the rest of a row is the env's ``extras``."""


def skyrl_gym_env_class(spec: str) -> type[SkyRLGymEnv]:
    env_id = spec.removeprefix(PREFIX).strip()
    if not env_id:
        raise EnvSpecError(f"{spec}: write skyrl-gym:ENV_ID (an id skyrl_gym.registry holds, e.g. gsm8k)")
    require("skyrl_gym", spec)
    return type("SkyRLGym", (SkyRLGymEnv,), {"env_id": env_id, "spec": spec, "__module__": __name__})


class SkyRLGymEnv(BaseEnv):
    """One SkyRL-Gym env id over its rows (see the module doc)."""

    max_turns = 1
    env_id: ClassVar[str] = ""
    spec: ClassVar[str] = ""

    def __init__(
        self,
        *,
        rows: str | Mapping[str, str] | None = None,
        env_config: Mapping[str, Any] | None = None,
        module: str | None = None,
    ) -> None:
        super().__init__()
        skyrl_gym = require("skyrl_gym", self.spec)
        if module is not None:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise EnvSpecError(f"{self.spec}: cannot import module {module!r} ({exc})") from exc
        if self.env_id not in skyrl_gym.registry:
            known = ", ".join(sorted(skyrl_gym.registry))
            raise EnvSpecError(
                f"{self.spec}: SkyRL-Gym has no env {self.env_id!r} (registered: {known}); register yours in a module "
                "and pass --env-arg module=MODULE"
            )
        self.rows = rows
        self.env_config = dict(env_config or {})

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> ListDataset:
        path = self._rows_file(split, base_dir)
        rows = _read_rows(path)[:max_examples] if max_examples is not None else _read_rows(path)
        examples = []
        for line, row in enumerate(rows, start=1):
            where = f"{path} row {line}"
            if not isinstance(row, Mapping) or not isinstance(row.get("prompt"), list):
                raise DatasetError(f"{where}: a SkyRL row needs a prompt (a list of chat messages)")
            if row.get("env_class") not in (None, self.env_id):
                raise DatasetError(f"{where}: env_class {row['env_class']!r} is not this spec's {self.env_id!r}")
            extras = {key: value for key, value in row.items() if key not in _ROW_KEYS}
            env = self._make(extras)
            try:
                if int(getattr(env, "max_turns", 1) or 1) > 1:
                    raise EnvSpecError(
                        f"{self.spec}: {where} makes a multi-step episode (max_turns {env.max_turns}); SkyRL-Gym envs "
                        "that answer the model turn by turn are not supported yet (one-step envs are)"
                    )
                prompt, _ = env.init(list(row["prompt"]))
            finally:
                env.close()
            examples.append({"prompt_messages": list(prompt), "skyrl": {"prompt": row["prompt"], "extras": extras}})
        return ListDataset(examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        from benchmax.rewards import run_sync

        messages = list(rollout.messages)
        answered = bool(messages) and messages[-1].get("role") == "assistant"
        answer = content_text(messages[-1].get("content")) if answered else ""
        row = rollout.example_args["skyrl"]
        return await run_sync(self._step, row["prompt"], row["extras"], answer)

    def _step(self, prompt: list[Any], extras: Mapping[str, Any], answer: str) -> dict[str, float]:
        env = self._make(extras)
        try:
            env.init(list(prompt))
            out = env.step(answer)
        finally:
            env.close()
        if not out["done"]:
            raise EnvSpecError(
                f"{self.spec}: step() asked for another turn; multi-step SkyRL-Gym episodes are not supported yet"
            )
        return {"reward": float(out["reward"])}

    def _make(self, extras: Mapping[str, Any]) -> Any:
        import skyrl_gym

        return skyrl_gym.make(self.env_id, env_config=dict(self.env_config), extras=dict(extras))

    def _rows_file(self, split: DatasetSplit, base_dir: Path) -> Path:
        given = self.rows.get(split) if isinstance(self.rows, Mapping) else self.rows
        if given is not None:
            path = Path(given)
            path = path if path.is_absolute() else base_dir / path
            if not path.is_file():
                raise FileNotFoundError(f"{self.spec}: no rows file {path}")
            return path
        for stem in _SPLIT_FILES[split]:
            for suffix in (".jsonl", ".parquet"):
                if (base_dir / f"{stem}{suffix}").is_file():
                    return base_dir / f"{stem}{suffix}"
        names = ", ".join(f"{stem}.jsonl|.parquet" for stem in _SPLIT_FILES[split])
        raise FileNotFoundError(f"{self.spec}: no {split} rows in {base_dir} ({names}); pass --env-arg rows=FILE")


def _read_rows(path: Path) -> list[Any]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ModuleNotFoundError:
            raise EnvSpecError(f"{path}: reading parquet needs pyarrow: pip install 'benchmax[export]'") from None
        return pq.read_table(path).to_pylist()
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return rows
