"""``Dataset``: an ordered, fixed collection whose examples read back exactly as they were given."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from benchmax.envs import DatasetError, Example
from benchmax.envs.dataset import Dataset, PackedExamples
from benchmax.envs.identity import canonical_example_id
from benchmax.loading import ExampleStream


@dataclasses.dataclass
class Point:
    x: int


PAYLOADS: list[Any] = [
    {"prompt_messages": [{"role": "user", "content": "héllo \u2603"}], "answer": 3, "z": None, "a": True},
    {"b": 1.5, "a": [0.1, -2.0, 1e300], "nested": {"k": [[], {}]}},
    {"tuple": (1, 2)},
    {"nan": math.nan},
    {"big": 2**70},
    {"obj": Point(1)},
    {1: "non-string key"},
    b"raw bytes",
    "a string payload",
    {"surrogate": "\ud800"},
]


def _same(left: Any, right: Any) -> bool:
    """Equal, with the same types and dict key order all the way down (NaN equal to NaN)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return left == right


@pytest.mark.parametrize("payload", PAYLOADS, ids=repr)
def test_every_payload_reads_back_with_its_types_and_key_order(payload):
    packed = PackedExamples([Example("id-1", payload)])

    (example,) = list(packed)
    assert example.id == "id-1"
    assert _same(example.payload, payload)
    assert _same(packed[0].payload, payload)


def test_a_read_payload_is_fresh_so_changing_it_changes_no_later_read():
    dataset = Dataset([{"prompt_messages": [{"role": "user", "content": "q"}], "answer": "1"}])

    first = dataset[0]
    first.payload["answer"] = "changed"
    first.payload["prompt_messages"].append({"role": "assistant", "content": "x"})

    assert dataset[0].payload == {"prompt_messages": [{"role": "user", "content": "q"}], "answer": "1"}


@pytest.mark.parametrize("payload", [PAYLOADS[0], {"b": 1.5, "a": [0.1, -2.0, 1e-300]}, PAYLOADS[2]], ids=repr)
def test_a_payload_row_reads_back_exactly_and_is_safe_from_later_changes_to_it(payload):
    row = dict(payload)
    dataset = Dataset([row])
    row["added later"] = 1

    assert dataset[0].id == canonical_example_id(payload)
    assert _same(dataset[0].payload, payload)


@pytest.mark.parametrize("payload", [{"nan": math.nan}, {"big": 2**70}, {1: "key"}, {"obj": Point(1)}], ids=repr)
def test_a_payload_row_without_an_id_is_refused_naming_its_index(payload):
    with pytest.raises(DatasetError, match=r"example\[1\]: payload is not a JSON object benchmax can identify"):
        Dataset([PAYLOADS[0], payload])


def test_payload_dicts_get_their_content_ids_and_examples_keep_theirs():
    row = {"prompt_messages": [{"role": "user", "content": "q"}], "answer": "1"}
    dataset = Dataset([row, Example("mine", {"x": 1}), row])

    assert len(dataset) == 3
    assert [example.id for example in dataset] == [canonical_example_id(row), "mine", canonical_example_id(row)]
    assert [example.id for example in dataset[1:]] == ["mine", canonical_example_id(row)]
    assert dataset[-1].payload == row


def test_a_0_2_subclass_that_sets_and_reads_examples_itself_still_works():
    class Legacy(Dataset[dict[str, Any]]):
        def __init__(self) -> None:  # 0.2.x style: no super().__init__, its own tuple
            self._examples = tuple(Example(f"e{n}", {"n": n}) for n in range(3))

        def first(self) -> Example[dict[str, Any]]:
            return self._examples[0]

    legacy = Legacy()

    assert len(legacy) == 3
    assert [example.payload for example in legacy] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert legacy[2].id == "e2"
    assert legacy.first() == Example("e0", {"n": 0})


def test_a_big_dataset_holds_its_examples_in_well_under_half_the_memory_of_the_objects():
    import tracemalloc

    def rows() -> list[dict[str, Any]]:
        return [
            {"prompt_messages": [{"role": "user", "content": f"What is {n} + {n * 7}? Use the add tool."}], "answer": n}
            for n in range(5000)
        ]

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        as_objects = tuple(Example(canonical_example_id(row), row) for row in rows())
        objects = tracemalloc.get_traced_memory()[0] - before
        del as_objects
        before = tracemalloc.get_traced_memory()[0]
        dataset = Dataset(rows())
        packed = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    assert len(dataset) == 5000
    assert packed < 0.5 * objects, f"{packed} bytes packed against {objects} as objects"


def _stream(dataset: Any, limit: int | None = None) -> ExampleStream:
    return ExampleStream(dataset, owner="Env.create_dataset('eval')", prompts=True, limit=limit)


def test_an_in_memory_dataset_tells_its_ids_without_reading_its_examples_and_reads_one_on_demand():
    rows = [{"prompt_messages": [{"role": "user", "content": f"q{index}"}], "answer": index} for index in range(5)]
    stream = _stream(Dataset(rows))

    assert list(stream.known_ids() or ()) == [example.id for example in stream]
    assert list(_stream(Dataset(rows), limit=3).known_ids() or ()) == [canonical_example_id(r) for r in rows[:3]]
    assert stream.example_at(4) == Example(canonical_example_id(rows[4]), rows[4])


def test_a_dataset_that_reads_its_examples_its_own_way_tells_no_ids():
    class Shuffled(Dataset[dict[str, Any]]):
        def __iter__(self):
            return reversed([self[index] for index in range(len(self))])

    assert _stream(Shuffled([{"prompt_messages": [{"role": "user", "content": "q"}]}])).known_ids() is None
    assert _stream([Example("x", {"prompt_messages": [{"role": "user"}]})]).known_ids() is None


def test_an_example_read_on_demand_is_checked_and_a_bad_one_named_by_its_place():
    stream = _stream(Dataset([{"prompt_messages": [{"role": "user", "content": "q"}]}, {"prompt_messages": []}]))

    with pytest.raises(DatasetError, match=r"Env\.create_dataset\('eval'\)\[1\]: the payload needs a non-empty"):
        stream.example_at(1)
    with pytest.raises(DatasetError, match=r"Env\.create_dataset\('eval'\)\[1\]: the payload needs a non-empty"):
        list(stream)


def test_a_dataset_keeps_each_examples_env_whether_read_by_index_slice_or_iteration():
    examples = [
        Example("math/a", {"prompt_messages": [{"role": "user", "content": "1+1"}]}, env="math"),
        {"prompt_messages": [{"role": "user", "content": "plain row"}]},
        Example("code/b", {"prompt_messages": [{"role": "user", "content": "fix it"}]}, env="code"),
    ]
    dataset = Dataset(examples)
    assert [example.env for example in dataset] == ["math", None, "code"]
    assert dataset[2].env == "code" and dataset[0].env == "math"
    assert [example.env for example in dataset[0:3]] == ["math", None, "code"]


def test_a_dataset_of_one_env_keeps_no_env_list():
    dataset = Dataset([{"prompt_messages": [{"role": "user", "content": str(n)}]} for n in range(3)])
    assert [example.env for example in dataset] == [None, None, None]


def test_a_dataset_names_its_rows_when_asked_and_copies_keep_its_digest():
    """Rows are named (content ids) only when asked; a pickled or copied dataset (an env sent to a
    worker process) has the same examples, ids and digest of its examples."""
    import copy
    import pickle

    from benchmax.envs import ListDataset

    rows = [{"prompt_messages": [{"role": "user", "content": f"q{index}"}], "n": index} for index in range(3)]
    dataset = ListDataset(rows)
    digest = dataset._content_digest()
    assert digest is not None and None in dataset._packed._ids
    for twin in (pickle.loads(pickle.dumps(dataset)), copy.deepcopy(dataset)):
        assert twin._content_digest() == digest
        assert [example.id for example in twin] == [canonical_example_id(row) for row in rows]
    assert [example.id for example in dataset] == [canonical_example_id(row) for row in rows]
    assert ListDataset([*rows[:2], {**rows[2], "n": 9}])._content_digest() != digest
