"""``JsonlDataset``: streaming reads, ``file:line`` errors, canonical ids."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmax.envs import DatasetError, Example, JsonlDataset, ListDataset, canonical_example_id


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


def test_max_examples_zero_yields_nothing_without_opening_the_file(tmp_path):
    assert len(JsonlDataset(tmp_path / "absent.jsonl", max_examples=0)) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_examples_must_be_a_non_negative_int(tmp_path, bad):
    with pytest.raises(ValueError, match="max_examples"):
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
        (b'{"answer": 1}', "non-empty 'prompt_messages' list"),
        (b'{"prompt_messages": []}', "non-empty 'prompt_messages' list"),
        (b'{"prompt_messages": "hi"}', "non-empty 'prompt_messages' list"),
        (b'{"prompt_messages": ["hi"]}', r"prompt_messages\[0\] must be an object"),
        (b'{"prompt_messages": [{"content": "hi"}]}', r"prompt_messages\[0\] needs a string 'role'"),
        (b'{"prompt_messages": [{"role": "user"}]}', r"prompt_messages\[0\] needs 'content'"),
        (
            b'{"prompt_messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 3}]}',
            r"prompt_messages\[1\]\.content must be a string or a list",
        ),
    ],
)
def test_a_bad_row_is_reported_with_file_line_and_the_problem(tmp_path, line, problem):
    path = write_lines(tmp_path / "data.jsonl", [orjson.dumps(row("ok")), b"", line])
    with pytest.raises(DatasetError, match=rf"data\.jsonl:3: .*{problem}"):
        JsonlDataset(path)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.jsonl: dataset file not found"):
        JsonlDataset(tmp_path / "nope.jsonl")


def test_payload_ids_are_canonical_content_hashes_stable_across_key_order(tmp_path):
    first = b'{"prompt_messages": [{"role": "user", "content": "q"}], "meta": {"a": 1, "b": [1, 2]}}'
    second = b'{"meta": {"b": [1, 2], "a": 1}, "prompt_messages": [{"content": "q", "role": "user"}]}'
    (a,) = JsonlDataset(write_lines(tmp_path / "a.jsonl", [first]))
    (b,) = JsonlDataset(write_lines(tmp_path / "b.jsonl", [second]))
    assert a.id == b.id == canonical_example_id(orjson.loads(first))
    assert a.id.startswith("sha256:")
    (c,) = JsonlDataset(write_lines(tmp_path / "c.jsonl", [first.replace(b'"a": 1', b'"a": 2')]))
    assert c.id != a.id


def test_canonical_id_is_a_fixed_value_on_every_machine():
    payload = {"prompt_messages": [{"role": "user", "content": "2+2?"}], "answer": "4"}
    assert canonical_example_id(payload) == "sha256:" + _sha256_prefix(
        b'{"answer":"4","prompt_messages":[{"content":"2+2?","role":"user"}]}'
    )


def _sha256_prefix(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()[:24]


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


def test_row_to_example_errors_name_file_and_line(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "a"}', b'{"other": 1}'])

    def convert(data: dict) -> dict:
        return {"prompt_messages": [{"role": "user", "content": data["q"]}]}

    with pytest.raises(DatasetError, match=r"d\.jsonl:2: row_to_example raised KeyError: 'q'"):
        JsonlDataset(path, row_to_example=convert)


def test_row_to_example_output_is_validated_too(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "a"}'])
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: payload needs a non-empty 'prompt_messages'"):
        JsonlDataset(path, row_to_example=lambda data: {"question": data["q"]})


def test_duplicate_rows_are_rejected_naming_both_lines(tmp_path):
    line = orjson.dumps(row("same"))
    path = write_lines(tmp_path / "d.jsonl", [line, orjson.dumps(row("other")), line])
    with pytest.raises(DatasetError, match=r"d\.jsonl:3: duplicate example id .* line 1"):
        JsonlDataset(path)


def test_list_dataset_validates_items_and_hashes_payloads():
    dataset = ListDataset([row("a"), Example("given", row("b"))])
    assert [example.id for example in dataset][1] == "given"
    assert dataset[0].id == canonical_example_id(row("a"))
    with pytest.raises(DatasetError, match=r"example\[1\]: payload needs"):
        ListDataset([row("a"), {"nope": 1}])


def test_a_dataset_error_from_row_to_example_gains_file_and_line(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [b'{"q": "a"}', b'{"q": ""}'])

    def convert(data: dict) -> dict:
        if not data["q"]:
            raise DatasetError("empty question")
        return {"prompt_messages": [{"role": "user", "content": data["q"]}]}

    with pytest.raises(DatasetError, match=r"^.*d\.jsonl:2: empty question$"):
        JsonlDataset(path, row_to_example=convert)


def test_row_to_example_ellipsis_means_rows_are_payloads(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [orjson.dumps(row("a", answer="1"))])
    (example,) = JsonlDataset(path, row_to_example=..., max_examples=None)
    assert example.payload == row("a", answer="1")
