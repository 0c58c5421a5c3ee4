"""The typed run meta: old and newer stores read, the JSON on disk keeps its shape, writers cannot misspell."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmax.store import Provenance, Run, RunMeta, RunWriter, provenance_changes
from benchmax.train import TrainConfig

STORED_PROVENANCE = {
    "benchmax": "0.3.0",
    "python": "3.11.9",
    "recorded_at": 1.5,
    "env": {"spec": "examples/math", "class": "math_env.MathEnv", "kind": "file", "path": "/e/math_env.py"},
    "code": {"root": "/e", "sha256": "ab" * 32, "files": 2, "bytes": 10, "truncated": False, "digests": {"a.py": "1"}},
    "git": {"commit": "c0ffee", "dirty": False, "repository": "/e"},
    "data": {
        "source": "JsonlDataset",
        "files": [{"path": "/d/train.jsonl", "size": 3, "sha256": "cd" * 32}],
        "count": 1,
        "bytes": 3,
        "sha256": "ef" * 32,
        "truncated": False,
    },
    "model": "m",
    "endpoint": ["http://a/v1", "http://b/v1"],
    "sampling": {"temperature": 0.5},
    "inherited": ["data"],
}


def test_a_stored_provenance_reads_as_its_record_and_writes_back_the_same_json() -> None:
    record = Provenance.from_json(STORED_PROVENANCE)

    assert record is not None
    assert record.env.class_name == "math_env.MathEnv" and record.data is not None
    assert record.data.files[0].path == "/d/train.jsonl" and record.endpoint == ("http://a/v1", "http://b/v1")
    assert record.to_json() == STORED_PROVENANCE
    assert provenance_changes(record, record) == []


def test_meta_of_an_old_or_newer_run_reads_and_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    stored = {
        "kind": "train",
        "status": "finished",  # training's old spelling
        "active_seconds": 3,
        "provenance": STORED_PROVENANCE,
        "dataset_size": "many",  # a value of another type
        "from_a_newer_benchmax": {"x": 1},
    }
    writer = RunWriter.create(tmp_path / "run", stored)
    writer.close()

    with Run(tmp_path / "run") as run:
        meta = run.run_meta
        raw = run.meta

    assert meta.status == "completed" and meta.kind == "train" and meta.active_seconds == 3.0
    assert meta.provenance == Provenance.from_json(STORED_PROVENANCE)
    assert meta.dataset_size is None and meta.extra == {"dataset_size": "many", "from_a_newer_benchmax": {"x": 1}}
    assert raw == stored, "the plain dict stays as stored"


def test_typed_writes_keep_the_meta_keys_and_json_and_refuse_a_field_that_does_not_exist(tmp_path: Path) -> None:
    provenance = Provenance.from_json(STORED_PROVENANCE)
    writer = RunWriter.create(tmp_path / "run", RunMeta(kind="eval", status="running", provenance=provenance))
    try:
        writer.update_meta(status="completed", error=None, outages=({"endpoint": "e"},))
        with pytest.raises(TypeError, match="statsu"):
            writer.update_meta(statsu="completed")
    finally:
        writer.close()

    with Run(tmp_path / "run") as run:
        rows = dict(run.sql("SELECT key, value FROM meta WHERE key != 'schema_version'"))

    assert {key: orjson.loads(value) for key, value in rows.items()} == {
        "kind": "eval",
        "status": "completed",
        "error": None,
        "outages": [{"endpoint": "e"}],
        "provenance": STORED_PROVENANCE,
    }


def test_a_stored_training_config_resumes_through_from_meta_and_an_unknown_key_is_left_out() -> None:
    config = TrainConfig(env="examples/format", run_dir=Path("/runs/a"), data_dir=Path("/data"), group_size=3)
    stored = {**orjson.loads(orjson.dumps(config.to_meta())), "a_key_from_another_version": 1}

    resumed = TrainConfig.from_meta(stored, run_dir=Path("/runs/a"), resume=True, max_steps=7)

    assert resumed.env == "examples/format" and resumed.group_size == 3 and resumed.data_dir == Path("/data")
    assert resumed.resume and resumed.max_steps == 7 and resumed.run_dir == Path("/runs/a")
