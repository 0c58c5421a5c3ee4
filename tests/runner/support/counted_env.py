"""Envs whose datasets show what a run reads of them: ``RowsReadEnv`` counts the rows its
streamed ``HFDataset`` (a local JSON Lines file, read on each pass) turns into examples, through
the dataset's own ``row_to_example`` hook; and
``KeptRowsEnv`` keeps the in-memory ``ListDataset`` it built from its data file, so a test can ask
which of its examples were named."""

from __future__ import annotations

import json
from typing import Any

from scored_env import ScoredEnv

from benchmax.envs import ListDataset
from benchmax.hf import HFDataset

ROWS_READ: list[int] = [0]
"""Rows every ``RowsReadEnv`` of this process turned into examples so far."""


def _counted(row: dict[str, Any]) -> dict[str, Any]:
    ROWS_READ[0] += 1
    return row


class RowsReadEnv(ScoredEnv):
    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return HFDataset(base_dir / f"{split}.jsonl", _counted, max_examples=max_examples)


class KeptRowsEnv(ScoredEnv):
    datasets: list[ListDataset] = []
    """Every dataset an env of this class built, latest last."""

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        lines = (base_dir / f"{split}.jsonl").read_text().splitlines()
        dataset = ListDataset(json.loads(line) for line in lines)
        KeptRowsEnv.datasets.append(dataset)
        return dataset
