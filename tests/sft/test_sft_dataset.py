"""The benchmax-sft-v1 contract: strict, all-or-nothing, every issue located."""

from __future__ import annotations

import json

import pytest

from benchmax.sft import SFT_DATASET_FORMAT, SftDataset, SftDatasetError, SftIssue

CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
TOOL = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}}}
CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
TOOL_CHAT = {
    "tools": [TOOL],
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "1+2?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL], "weight": 0},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "assistant", "content": "3"},
    ],
    "metadata": {"source": "unit", "é": [1, 2.5, None, True]},
}


def issues(rows) -> list[tuple[str, str]]:
    with pytest.raises(SftDatasetError) as caught:
        SftDataset.from_rows(rows)
    return [(issue.location, issue.message) for issue in caught.value.issues]


def test_valid_rows_become_canonical_jsonl(tmp_path):
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps(TOOL_CHAT, indent=None) + "\n\n   \n" + json.dumps(CHAT) + "\n", encoding="utf-8")
    dataset = SftDataset.from_jsonl(path)
    assert len(dataset) == 2 and list(dataset) == [TOOL_CHAT, CHAT]
    lines = dataset.to_jsonl_bytes().decode().splitlines()
    assert lines[1] == '{"messages":[{"content":"hi","role":"user"},{"content":"hello","role":"assistant"}]}'
    assert '"é":[1,2.5,null,true]' in lines[0]
    assert SftDataset.from_rows(dataset.rows).to_jsonl_bytes() == dataset.to_jsonl_bytes()
    assert SFT_DATASET_FORMAT == "benchmax-sft-v1"


def test_stored_rows_are_copies_of_the_input():
    row = json.loads(json.dumps(CHAT))
    dataset = SftDataset.from_rows([row])
    row["messages"][0]["content"] = "changed"
    assert dataset.rows[0]["messages"][0]["content"] == "hi"


def test_a_dataset_cannot_be_made_unvalidated():
    with pytest.raises(TypeError, match="from_jsonl"):
        SftDataset((), ())


def test_every_issue_of_every_row_is_reported_in_order():
    bad = {
        "messages": [
            {"role": "user", "content": "", "weight": 1},
            {"role": "assistant", "content": "x", "weight": 0.5},
            {"role": "robot", "content": "x"},
        ],
        "extra": 1,
    }
    found = issues([CHAT, bad])
    assert found == [
        ("$", "unknown top-level key(s): extra"),
        ("$.messages[0]", "unknown key(s): weight (weight is only supported on assistant messages)"),
        ("$.messages[0].content", "content must not be empty"),
        ("$.messages[1].weight", "weight must be the integer 0 or 1"),
        ("$.messages[2].role", 'role must be one of "assistant", "system", "tool", "user"'),
        ("$.messages", "at least one assistant message with weight 1 (or omitted weight) is required"),
    ]


def test_tool_calls_need_definitions_and_one_result_each_in_order():
    second = {**CALL, "id": "c2"}
    row = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [CALL, second]},
            {"role": "tool", "tool_call_id": "c2", "content": "x"},
            {"role": "user", "content": "more"},
            {"role": "tool", "tool_call_id": "c1", "content": "late"},
            {"role": "assistant", "content": "done"},
        ]
    }
    assert issues([row]) == [
        ("$.messages[2].tool_call_id", "tool result for id 'c2' is out of declaration order"),
        ("$.messages[1].tool_calls", "tool call id(s) 'c1' have no tool result before the next non-tool message"),
        ("$.messages[4].tool_call_id", "tool result for id 'c1' appears after its tool-call window closed"),
        ("$.tools", "tools must be a non-empty list when any message makes a tool call"),
    ]
    undefined = {**TOOL_CHAT, "tools": [{"type": "function", "function": {"name": "mul", "parameters": {}}}]}
    assert issues([undefined]) == [
        ("$.messages[2].tool_calls[0].function.name", "tool call references undefined function 'add'")
    ]


def test_arguments_and_metadata_follow_strict_json():
    call = {**CALL, "function": {"name": "add", "arguments": '{"a": 1, "a": 2}'}}
    row = {
        **TOOL_CHAT,
        "messages": [
            *TOOL_CHAT["messages"][:2],
            {"role": "assistant", "tool_calls": [call]},
            *TOOL_CHAT["messages"][3:],
        ],
        "metadata": {"_castform_run": 1, "tools": [], "x": float("nan")},
    }
    assert issues([row]) == [
        ("$.metadata.x", "number must be finite"),
        ("$.messages[2].tool_calls[0].function.arguments", "arguments must decode as JSON: duplicate object key 'a'"),
        ("$.metadata", "metadata key '_castform_run' uses the reserved '_castform_' prefix"),
        (
            "$.metadata",
            'metadata key "tools" is reserved for the training runtime; declare tools at the top level of the row',
        ),
    ]


def test_jsonl_problems_name_their_physical_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [
        "\ufeff" + json.dumps(CHAT),
        "",
        '{"messages": [], "messages": []}',
        "[1]",
        '{"messages": NaN}',
        json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SftDatasetError) as caught:
        SftDataset.from_jsonl(path)
    found = [(issue.line, issue.row, issue.location, issue.message) for issue in caught.value.issues]
    assert found == [
        (1, 0, "$", "a UTF-8 BOM is not allowed"),
        (3, 1, "$", "duplicate object key 'messages'"),
        (4, 2, "$", "row must be a JSON object"),
        (5, 3, "$", "non-finite number literal 'NaN' is not allowed"),
        (6, 4, "$.messages[0].content", "content must be a string"),
        (6, 4, "$.messages", "at least one assistant message with weight 1 (or omitted weight) is required"),
    ]
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).splitlines()[:2] == [
        "invalid benchmax-sft-v1 dataset: 6 issue(s)",
        "  line 1 row 0 $: a UTF-8 BOM is not allowed",
    ]


def test_empty_input_deep_nesting_and_the_preview_limit(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    with pytest.raises(SftDatasetError) as caught:
        SftDataset.from_jsonl(tmp_path / "empty.jsonl")
    assert caught.value.issues == (SftIssue("dataset contains no rows", "$"),)
    deep: object = 1
    for _ in range(70):
        deep = [deep]
    # the row is level 1, metadata 2, d 3: the 65th level is d[0] nested 62 times
    assert issues([{**CHAT, "metadata": {"d": deep}}]) == [
        ("$.metadata.d" + "[0]" * 62, "JSON nesting exceeds 64 levels")
    ]
    many = [{"messages": [{"role": "user", "content": ""}]} for _ in range(15)]
    with pytest.raises(SftDatasetError) as caught:
        SftDataset.from_rows(many)
    assert len(caught.value.issues) == 30
    assert str(caught.value).endswith("  ... and 10 more")
    assert caught.value.issues[0].as_dict() == {
        "line": None,
        "location": "$.messages[0].content",
        "message": "content must not be empty",
        "row": 0,
    }


def test_non_json_python_values_are_reported_not_coerced():
    row = {**CHAT, "metadata": {"when": (1, 2), 3: "x"}}
    assert issues([row]) == [
        ("$.metadata", "object key 3 must be a string"),
        (
            "$.metadata.when",
            "unsupported type tuple; only JSON object, array, string, number, boolean, and null values are allowed",
        ),
    ]
