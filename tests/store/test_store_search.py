"""Text search over a run: words of the answer, the error and the ids, or of the whole transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax.envs import RolloutOutcome
from benchmax.store import GroupWrite, RolloutFilter, RunQueries, RunWriter, match_query

TRANSCRIPTS = {
    "plain": ("The capital is Paris", None, "Where is the Eiffel tower?"),
    "accent": ("Réponse: café crème", None, "Commande au comptoir"),
    "broken": ("", "tool_error: the calculator exploded", "add 2 and 2"),
    "tools": ("4", None, "What is 2 + 2? Use calculator_v2"),
}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    writer = RunWriter.create(tmp_path / "run", {})
    for index, (name, (answer, error, prompt)) in enumerate(TRANSCRIPTS.items()):
        messages = [{"role": "user", "content": prompt}]
        if name == "tools":
            call = {"id": "c", "type": "function", "function": {"name": "calculator_v2", "arguments": '{"expr": "2"}'}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "assistant", "content": answer})
        outcome = RolloutOutcome(
            rewards={} if error else {"x": 1.0},
            termination_reason="tool_error" if error else "finished",
            error=error,
            rollout_id=f"{name}#0",
            example_id=f"ex-{name}",
            messages=messages,
        )
        writer.write_group(GroupWrite(name, f"ex-{name}", index, 0, (outcome,), (0,)))
    writer.close()
    return tmp_path / "run"


def _found(run_dir: Path, text: str, *, in_transcript: bool = False) -> list[str]:
    with RunQueries(run_dir) as run:
        page = run.rollouts(RolloutFilter(text=text, in_transcript=in_transcript))
    return sorted(row["rollout_id"] for row in page.rows)


def test_words_of_answers_errors_and_ids_match_by_prefix_in_any_order(run_dir):
    assert _found(run_dir, "pari") == ["plain#0"]
    assert _found(run_dir, "capital PARIS") == ["plain#0"]
    assert _found(run_dir, "paris capital") == ["plain#0"]
    assert _found(run_dir, "cafe") == ["accent#0"], "diacritics fold away"
    assert _found(run_dir, "exploded calculator") == ["broken#0"]
    assert _found(run_dir, "ex-tools") == ["tools#0"]
    assert _found(run_dir, "eiffel") == [], "the prompt is only searched with the whole transcript"


def test_the_whole_transcript_includes_prompts_and_tool_calls(run_dir):
    assert _found(run_dir, "eiffel", in_transcript=True) == ["plain#0"]
    assert _found(run_dir, "calculator_v2", in_transcript=True) == ["tools#0"]
    assert _found(run_dir, "expr", in_transcript=True) == ["tools#0"]


@pytest.mark.parametrize("text", ['"', "a OR b", "NEAR(x y)", "*", "x:y", "{answer}: paris", "^paris", "-", "()"])
def test_search_syntax_in_the_text_is_only_ever_words(run_dir, text):
    query = match_query(text, in_transcript=True)
    assert query is None or all(part.startswith('"') and part.endswith('"*') for part in query.split(" "))
    _found(run_dir, text)  # never an FTS5 syntax error
    _found(run_dir, text, in_transcript=True)
