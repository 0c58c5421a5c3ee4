"""``HFDataset``: Hugging Face ``datasets`` as an env's dataset, on files the tests write.

Streaming is proven by damage: the tail of a big file is made unreadable, and a
capped read must still succeed (it never reached the tail) while a full read
fails naming the file and the last good row.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmax.envs import (
    BaseEnv,
    DatasetError,
    DatasetNotFound,
    JsonlDataset,
    canonical_example_id,
    collect_dataset_problems,
)
from benchmax.hf import HFDataset
from benchmax.loading import collect_examples


def messages(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def question_row(row: dict) -> dict:
    return {"prompt_messages": messages(row["question"]), "answer": row["answer"]}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_jsonl_file_gives_the_same_examples_and_ids_as_jsonl_dataset(tmp_path):
    rows = [{"prompt_messages": messages(f"q{i}"), "answer": str(i), "score": i / 2} for i in range(6)]
    path = write_jsonl(tmp_path / "eval.jsonl", rows)

    examples = list(HFDataset(path))

    assert [example.payload for example in examples] == rows
    assert [example.id for example in examples] == [example.id for example in JsonlDataset(path)]
    assert examples[0].id == canonical_example_id(rows[0])


def test_max_examples_reads_only_the_first_row_groups_of_a_big_parquet_file(tmp_path):
    size, group = 100_000, 5_000
    path = tmp_path / "big.parquet"
    table = pa.table({"question": [f"q{i}" for i in range(size)], "answer": [str(i) for i in range(size)]})
    pq.write_table(table, path, row_group_size=group)
    _damage_last_row_groups(path, 2)
    with pytest.raises(OSError):
        pq.ParquetFile(path).read_row_group(size // group - 1)  # the tail really is unreadable

    capped = HFDataset(path, question_row, max_examples=25)
    first = list(capped)

    assert [example.payload["answer"] for example in first] == [str(i) for i in range(25)]
    assert capped.rows_read == 25


def test_max_examples_reads_only_the_start_of_a_big_jsonl_file(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:  # ~14 MB: more than one of the JSON reader's 10 MB blocks
        for i in range(160_000):
            handle.write(json.dumps({"question": f"question {i} " + "x" * 60, "answer": str(i)}) + "\n")
        handle.write('{"question": "cut off\n')

    capped = HFDataset(path, question_row, max_examples=3)

    assert [example.payload["answer"] for example in capped] == ["0", "1", "2"]
    assert capped.rows_read == 3


def test_a_file_unreadable_past_some_row_fails_naming_the_file_and_the_last_good_row(tmp_path):
    path = tmp_path / "small.parquet"
    size = 3_000  # more than one read batch, so good rows come before the damaged tail
    pq.write_table(pa.table({"question": [f"q{i}" for i in range(size)], "answer": [str(i) for i in range(size)]}),
                   path, row_group_size=500)  # fmt: skip
    _damage_last_row_groups(path, 1)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "a", "answer": "1"}\n{"question": \n')

    dataset = HFDataset(path, question_row)
    with pytest.raises(DatasetError) as caught:
        list(dataset)

    found = re.match(rf"{re.escape(str(path))}: cannot read past row (\d+) \(OSError: ", str(caught.value))
    assert found, str(caught.value)
    last_good = int(found.group(1))
    assert 0 < last_good <= size - 500 and dataset.rows_read == last_good
    with pytest.raises(DatasetError, match=rf"^{broken}: "):
        list(HFDataset(broken, question_row))


def test_csv_rows_map_through_the_user_function_and_its_errors_name_the_row(tmp_path):
    path = tmp_path / "quiz.csv"
    path.write_text("question,answer\nCapital of France?,paris\nCapital of Japan?,tokyo\n,\n")

    def strict(row: dict) -> dict:
        if not row["question"]:
            raise KeyError("question is empty")
        return question_row(row)

    dataset = HFDataset(path, strict)
    with pytest.raises(KeyError) as caught:
        list(dataset)

    assert caught.value.__notes__ == [f"while loading {path} row 3"]
    assert [example.payload["answer"] for example in HFDataset(path, strict, max_examples=2)] == ["paris", "tokyo"]


def test_a_dataset_error_from_the_user_function_keeps_its_type_and_gains_the_row(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", [{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}])

    def picky(row: dict) -> dict:
        if row["answer"] == "2":
            raise DatasetError("answer 2 is not allowed")
        return question_row(row)

    with pytest.raises(DatasetError, match=rf"^{path} row 2: answer 2 is not allowed$"):
        list(HFDataset(path, picky))


def test_validation_collects_every_bad_row_and_names_good_rows_where_they_are(tmp_path):
    rows = [{"question": f"q{i}", "answer": "" if i in (1, 3) else str(i)} for i in range(6)]
    path = write_jsonl(tmp_path / "rows.jsonl", rows)

    def needs_answer(row: dict) -> dict:
        if not row["answer"]:
            raise ValueError("empty answer")
        return question_row(row)

    with collect_dataset_problems() as problems:
        dataset = HFDataset(path, needs_answer)
    examples = list(dataset)

    assert [str(problem) for problem in problems] == [
        f"{path} row 2: row_to_example raised ValueError: empty answer",
        f"{path} row 4: row_to_example raised ValueError: empty answer",
    ]
    assert [example.payload["answer"] for example in examples] == ["0", "2", "4", "5"]
    assert [dataset.location_of(index) for index in range(4)] == [f"{path} row {n}" for n in (1, 3, 5, 6)]


def test_a_save_to_disk_directory_and_one_split_of_a_saved_dataset_dict(tmp_path):
    train = datasets.Dataset.from_dict({"question": ["a", "b", "c"], "answer": ["1", "2", "3"]})
    test = datasets.Dataset.from_dict({"question": ["d"], "answer": ["4"]})
    train.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(tmp_path / "splits"))

    saved = HFDataset(tmp_path / "saved", question_row, max_examples=2)
    split = HFDataset("splits", question_row, split="test", base_dir=tmp_path)

    assert [example.payload["answer"] for example in saved] == ["1", "2"]
    assert [example.payload["answer"] for example in split] == ["4"]
    assert len(saved) == 2 and saved[1].payload["answer"] == "2"
    assert {path.suffix for path in saved.source_files()} >= {".arrow", ".json"}
    with pytest.raises(DatasetError, match="splits train, test; pass split=NAME"):
        HFDataset(tmp_path / "splits")
    with pytest.raises(DatasetError, match="split 'dev' is not one of them"):
        HFDataset(tmp_path / "splits", split="dev")


def test_a_glob_reads_files_in_order_and_rows_are_located_in_their_own_file(tmp_path):
    for shard in range(3):
        table = pa.table({"question": [f"s{shard}q{i}" for i in range(2)], "answer": [f"{shard}{i}" for i in range(2)]})
        pq.write_table(table, tmp_path / f"train-{shard:05d}.parquet")

    dataset = HFDataset("train-*.parquet", question_row, base_dir=tmp_path)
    answers = [example.payload["answer"] for example in dataset]

    assert answers == ["00", "01", "10", "11", "20", "21"]
    assert dataset.location_of(3) == f"{tmp_path / 'train-00001.parquet'} row 2"
    assert [path.name for path in dataset.source_files()] == [f"train-{n:05d}.parquet" for n in range(3)]


def test_the_examples_of_an_env_on_hf_data_are_checked_with_the_row_that_broke(tmp_path):
    rows = [{"prompt": messages("ok"), "answer": "1"}, {"prompt": [{"content": "no role"}], "answer": "2"}]
    path = write_jsonl(tmp_path / "eval.jsonl", rows)

    class HubEnv(BaseEnv):
        async def create_dataset(self, split, base_dir, *, max_examples=None):
            return HFDataset(
                f"{split}.jsonl", lambda row: {"prompt_messages": row["prompt"]}, max_examples, base_dir=base_dir
            )

        async def compute_reward(self, rollout):
            return {"ok": 1.0}

    async def read() -> None:
        await collect_examples(HubEnv(), "eval", tmp_path)

    with pytest.raises(DatasetError, match=rf"^{path} row 2: prompt_messages\[0\] needs a string 'role'"):
        asyncio.run(read())


def test_missing_files_unknown_formats_and_paths_outside_base_dir_are_refused_up_front(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")

    with pytest.raises(DatasetNotFound, match="dataset file not found"):
        HFDataset(tmp_path / "absent.parquet")
    with pytest.raises(DatasetError, match="cannot tell its format from the name; pass format="):
        HFDataset(tmp_path / "notes.txt")
    with pytest.raises(DatasetError, match="outside the data directory"):
        HFDataset("../elsewhere.jsonl", base_dir=tmp_path / "data")
    with pytest.raises(DatasetNotFound, match="not a Hub dataset name"):
        HFDataset.from_hf("data/train.parquet", base_dir=tmp_path)


def test_from_hf_reads_a_local_path_like_the_constructor(tmp_path):
    write_jsonl(tmp_path / "eval.jsonl", [{"question": "q", "answer": "a"}])

    dataset = HFDataset.from_hf("eval.jsonl", question_row, base_dir=tmp_path)

    assert [example.payload["answer"] for example in dataset] == ["a"]
    assert dataset.origin == {"files": [str((tmp_path / "eval.jsonl").resolve())]}


def test_a_hub_name_offline_fails_as_a_dataset_error_naming_it(tmp_path):
    code = (
        "from benchmax.envs import DatasetError\nfrom benchmax.hf import HFDataset\n"
        "d = HFDataset.from_hf('benchmax-tests/no-such-dataset', split='test')\n"
        "assert d.origin['hub'] == 'benchmax-tests/no-such-dataset' and d.source_files() == ()\n"
        "try:\n    list(d)\nexcept DatasetError as exc:\n    print('error:', exc)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert "error: benchmax-tests/no-such-dataset[test]: datasets could not open the Hub dataset" in done.stdout


def _damage_last_row_groups(path: Path, count: int) -> None:
    """Overwrite the column data of the last ``count`` row groups: reading them fails, the rest reads."""
    metadata = pq.ParquetFile(path).metadata
    with path.open("r+b") as handle:
        for index in range(metadata.num_row_groups - count, metadata.num_row_groups):
            group = metadata.row_group(index)
            for column in range(group.num_columns):
                chunk = group.column(column)
                start = chunk.dictionary_page_offset or chunk.data_page_offset
                handle.seek(start)
                handle.write(b"\xff" * chunk.total_compressed_size)


def test_the_same_rows_as_json_jsonl_csv_and_parquet_give_the_same_ids_on_every_pass(tmp_path):
    rows = [{"question": f"capital {i}?", "answer": f"city {i}"} for i in range(5)]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    write_jsonl(tmp_path / "rows.jsonl", rows)
    (tmp_path / "rows.csv").write_text("question,answer\n" + "".join(f"{r['question']},{r['answer']}\n" for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")

    ids = {}
    for suffix in ("json", "jsonl", "csv", "parquet"):
        dataset = HFDataset(tmp_path / f"rows.{suffix}", question_row)
        first, second = [example.id for example in dataset], [example.id for example in dataset]
        assert first == second, f"{suffix}: ids changed between passes"
        ids[suffix] = first

    expected = [canonical_example_id(question_row(row)) for row in rows]
    assert ids == {suffix: expected for suffix in ("json", "jsonl", "csv", "parquet")}
    assert len(set(expected)) == len(rows)

