"""The examples in docs/rewards.md run as written."""

from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "rewards.md"


def _examples():
    text = DOC.read_text()
    examples = []
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        if lines[index].rstrip() == "```python":
            body = []
            index += 1
            in_string = False
            while index < len(lines):
                line = lines[index]
                if line.count('"""') % 2:
                    in_string = not in_string
                if line.rstrip() == "```" and not in_string:
                    break
                body.append(line)
                index += 1
            examples.append("".join(body))
        index += 1
    return examples


EXAMPLES = _examples()


def test_the_doc_has_one_example_per_family():
    assert len(EXAMPLES) >= 7


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_doc_example_runs(source):
    exec(compile(source, str(DOC), "exec"), {"__name__": "__doc_example__"})
