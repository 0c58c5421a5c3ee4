"""``JsonlDataset``: streaming reads, ``file:line`` errors, 0.2.x's canonical ids and row semantics."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import orjson
import pytest

from benchmax.envs import BaseEnv, DatasetError, Example, JsonlDataset, JsonRow, ListDataset, canonical_example_id
from benchmax.loading import collect_examples


def row(text: str, **fields: object) -> dict:
    return {"prompt_messages": [{"role": "user", "content": text}], **fields}


def write_lines(path: Path, lines: list[bytes | str]) -> Path:
    path.write_bytes(b"".join((line.encode() if isinstance(line, str) else line) + b"\n" for line in lines))
    return path


def test_rows_load_in_file_order_with_payload_intact(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [orjson.dumps(row(f"q{i}", answer=i)) for i in range(3)])
    dataset = JsonlDataset(path)
    assert len(dataset) == 3
    assert [example.payload["answer"] for example in dataset] == [0, 1, 2]
    assert dataset[1].payload["prompt_messages"] == [{"role": "user", "content": "q1"}]


def test_max_examples_stops_before_a_broken_line_further_down(tmp_path):
    lines = [orjson.dumps(row(f"q{i}")) for i in range(10)] + [b"{not json at all"]
    path = write_lines(tmp_path / "d.jsonl", lines)
    assert len(JsonlDataset(path, max_examples=10)) == 10
    with pytest.raises(DatasetError, match=r"d\.jsonl:11: invalid JSON"):
        JsonlDataset(path)


def test_max_examples_reads_only_the_head_of_a_large_file(tmp_path):
    path = tmp_path / "big.jsonl"
    line = orjson.dumps(row("x" * 1000)) + b"\n"
    with path.open("wb") as handle:
        handle.write(orjson.dumps(row("first")) + b"\n")
        for _ in range(2_000):
            handle.write(line)
        handle.write(b"\xff\xfe garbage that is not JSON\n")
    dataset = JsonlDataset(path, max_examples=1)
    assert [example.payload["prompt_messages"][0]["content"] for example in dataset] == ["first"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_max_examples_must_be_a_positive_int_as_in_0_2(tmp_path, bad):
    with pytest.raises(ValueError, match="max_examples must be a positive integer or None"):
        JsonlDataset(tmp_path / "d.jsonl", max_examples=bad)


def test_blank_and_whitespace_lines_are_skipped_and_line_numbers_still_count_them(tmp_path):
    path = write_lines(
        tmp_path / "d.jsonl",
        [orjson.dumps(row("a")), b"", b"   ", b"\t", orjson.dumps(row("b")), b"", b"[1, 2]"],
    )
    with pytest.raises(DatasetError, match=r"d\.jsonl:7: each line must be a JSON object, got list"):
        JsonlDataset(path)
    assert len(JsonlDataset(path, max_examples=2)) == 2


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"prompt_messages": [', "invalid JSON"),
        (b'"just a string"', "must be a JSON object, got str"),
        (b"42", "must be a JSON object, got int"),
    ],
)
def test_a_bad_line_is_reported_with_file_line_and_the_problem(tmp_path, line, problem):
    path = write_lines(tmp_path / "data.jsonl", [orjson.dumps(row("ok")), b"", line])
    with pytest.raises(DatasetError, match=rf"data\.jsonl:3: .*{problem}"):
        JsonlDataset(path)


class _PromptEnv(BaseEnv):
    max_turns = 1

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(self.path, max_examples=max_examples)

    async def compute_reward(self, rollout):
        return {"one": 1.0}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"answer": 1}', "non-empty 'prompt_messages' list"),
        (b'{"prompt_messages": []}', "non-empty 'prompt_messages' list"),
        (b'{"prompt_messages": "hi"}', "non-empty 'prompt_messages' list"),
        (b'{"prompt_messages": ["hi"]}', r"prompt_messages\[0\] must be an object"),
        (b'{"prompt_messages": [{"content": "hi"}]}', r"prompt_messages\[0\] needs a string 'role'"),
        (
            b'{"prompt_messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 3}]}',
            r"prompt_messages\[1\]\.content must be a string or a list",
        ),
    ],
)
async def test_a_base_env_example_without_usable_prompt_messages_names_file_and_line(tmp_path, line, problem):
    path = write_lines(tmp_path / "data.jsonl", [orjson.dumps(row("ok")), b"", line])
    assert len(JsonlDataset(path)) == 2, "a dataset on its own accepts any JSON object"
    with pytest.raises(DatasetError, match=rf"data\.jsonl:3: .*{problem}"):
        await collect_examples(_PromptEnv(path), "eval", tmp_path)


async def test_prompt_messages_need_only_a_role(tmp_path):
    path = write_lines(tmp_path / "data.jsonl", [b'{"prompt_messages": [{"role": "user"}]}'])
    (example,) = await collect_examples(_PromptEnv(path), "eval", tmp_path)
    assert example.payload["prompt_messages"] == [{"role": "user"}]


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.jsonl: dataset file not found"):
        JsonlDataset(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError):
        JsonlDataset(tmp_path / "nope.jsonl")


def test_payload_ids_are_canonical_content_hashes_stable_across_key_order(tmp_path):
    first = b'{"prompt_messages": [{"role": "user", "content": "q"}], "meta": {"a": 1, "b": [1, 2]}}'
    second = b'{"meta": {"b": [1, 2], "a": 1}, "prompt_messages": [{"content": "q", "role": "user"}]}'
    (a,) = JsonlDataset(write_lines(tmp_path / "a.jsonl", [first]))
    (b,) = JsonlDataset(write_lines(tmp_path / "b.jsonl", [second]))
    assert a.id == b.id == canonical_example_id(orjson.loads(first))
    assert len(a.id) == 64 and int(a.id, 16) >= 0
    (c,) = JsonlDataset(write_lines(tmp_path / "c.jsonl", [first.replace(b'"a": 1', b'"a": 2')]))
    assert c.id != a.id


def test_canonical_id_is_0_2_s_fixed_value_on_every_machine():
    payload = {"prompt_messages": [{"role": "user", "content": "2+2?"}], "answer": "4", "weight": 2.0}
    # 0.2.x hashes {"v": 1, "value": ...} with sorted keys, no spaces, and integral floats as ints.
    expected = hashlib.sha256(
        b'{"v":1,"value":{"answer":"4","prompt_messages":[{"content":"2+2?","role":"user"}],"weight":2}}'
    ).hexdigest()
    assert canonical_example_id(payload) == expected
    assert canonical_example_id({"x": 0.5}) == hashlib.sha256(b'{"v":1,"value":{"x":0.5}}').hexdigest()
    assert canonical_example_id({"x": 1e15}) == hashlib.sha256(b'{"v":1,"value":{"x":1000000000000000}}').hexdigest()
    assert canonical_example_id({"x": 1.5e-7}) == hashlib.sha256(b'{"v":1,"value":{"x":1.5e-07}}').hexdigest()


@pytest.mark.parametrize("bad", [{"x": float("nan")}, {"x": 2**60}, {1: "a"}, {"x": object()}])
def test_values_that_have_no_canonical_json_form_are_refused(bad):
    with pytest.raises(ValueError):
        canonical_example_id(bad)


def test_row_to_example_may_return_an_example_with_its_own_id(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"id": "x1", "q": "hello", "answer": 3}'])

    def convert(data: dict) -> Example:
        return Example(
            data["id"],
            {"prompt_messages": [{"role": "user", "content": data["q"]}], "answer": data["answer"]},
        )

    (example,) = JsonlDataset(path, row_to_example=convert)
    assert example.id == "x1"
    assert example.payload["answer"] == 3


def test_row_to_example_may_return_a_plain_payload_dict(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "hello"}'])
    (example,) = JsonlDataset(
        path, row_to_example=lambda data: {"prompt_messages": [{"role": "user", "content": data["q"]}]}
    )
    assert example.id == canonical_example_id(example.payload)


def test_row_to_example_errors_keep_their_type_and_name_file_and_line(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "a"}', b'{"other": 1}'])

    def convert(data: dict) -> dict:
        return {"prompt_messages": [{"role": "user", "content": data["q"]}]}

    with pytest.raises(KeyError, match="'q'") as caught:
        JsonlDataset(path, row_to_example=convert)
    assert any(re.search(r"d\.jsonl:2", note) for note in caught.value.__notes__)


def test_row_to_example_output_must_be_an_example_or_a_payload(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "a"}'])
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: expected an Example or a payload dict, got str"):
        JsonlDataset(path, row_to_example=lambda data: data["q"])


def test_repeated_rows_load_as_repeats(tmp_path):
    line = orjson.dumps(row("same"))
    path = write_lines(tmp_path / "d.jsonl", [line, orjson.dumps(row("other")), line])
    dataset = JsonlDataset(path)
    assert len(dataset) == 3
    assert dataset[0].id == dataset[2].id != dataset[1].id


def test_list_dataset_hashes_payloads_and_keeps_given_ids():
    dataset = ListDataset([row("a"), Example("given", row("b"))])
    assert [example.id for example in dataset][1] == "given"
    assert dataset[0].id == canonical_example_id(row("a"))
    with pytest.raises(DatasetError, match=r"example\[1\]: expected an Example or a payload dict"):
        ListDataset([row("a"), "nope"])


def test_jsonl_dataset_is_generic_and_subclassable_as_in_0_2(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "a", "answer": "1"}'])

    class MathDataset(JsonlDataset[JsonRow]):
        def __init__(self, path: Path) -> None:
            super().__init__(path, row_to_example=self.convert)

        @staticmethod
        def convert(data: JsonRow) -> Example[JsonRow]:
            payload = {"prompt_messages": [{"role": "user", "content": data["q"]}], "answer": data["answer"]}
            return Example(id=canonical_example_id(payload), payload=payload)

    (example,) = MathDataset(path)
    assert example.payload["answer"] == "1"


def test_row_to_example_ellipsis_means_rows_are_payloads(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [orjson.dumps(row("a", answer="1"))])
    (example,) = JsonlDataset(path, row_to_example=..., max_examples=None)
    assert example.payload == row("a", answer="1")
