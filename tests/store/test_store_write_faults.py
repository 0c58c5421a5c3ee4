"""A group the store cannot keep costs that group only: the others land, the run ends truthfully.

Each fault is a value SQLite or the transcript codec refuses (a server's token
count past 64 bits got this far once: the whole run was lost and stayed
"running"). The client now refuses such replies first; these tests hand the
writer the values directly, as any other producer of rollouts could.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax.envs import Example, RolloutOutcome, TurnRecord, Usage
from benchmax.runner import RunSession
from benchmax.store import GroupWrite, RolloutCost, StoreError, open_run

FAULTS = {
    "usage past 64 bits": ("OverflowError", TurnRecord(0, 0.0, 0.1, usage=Usage(2**64 - 1, 3))),
    "usage below -2**63": ("TypeError", TurnRecord(0, 0.0, 0.1, usage=Usage(1, -(2**63) - 1))),
    "token id past 64 bits": ("TypeError", TurnRecord(0, 0.0, 0.1, completion_token_ids=(1, 2**70))),
}


def _group(name: str, index: int, *, turn: TurnRecord | None = None, rollout_ids: tuple[str, ...] = ()) -> GroupWrite:
    ids = rollout_ids or (f"eval/{name}#0", f"eval/{name}#1")
    outcomes = tuple(
        RolloutOutcome(
            rewards={"ok": 1.0},
            termination_reason="finished",
            rollout_id=rollout_id,
            example_id=name,
            split="eval",
            messages=[{"role": "user", "content": name}, {"role": "assistant", "content": f"answer {name}"}],
            turns=(turn or TurnRecord(0, 0.0, 0.1, usage=Usage(10, 2)),),
            started_at=100.0,
            ended_at=101.0,
        )
        for rollout_id in ids
    )
    costs = tuple(RolloutCost(usd=0.5, requests=1) for _ in outcomes)
    return GroupWrite(f"eval/{name}", name, index, 0, outcomes, tuple(range(len(outcomes))), costs=costs)


def _session(run_dir: Path, names: list[str]) -> RunSession:
    session = RunSession.create(run_dir, kind="eval", meta={})
    session.add_examples("eval", [Example(name, {"prompt_messages": []}) for name in names])
    return session


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("apart", [False, True], ids=["one-transaction", "own-transactions"])
def test_a_group_the_store_cannot_keep_is_stored_as_failed_and_the_others_whole(
    tmp_path: Path, fault: str, apart: bool
) -> None:
    kind, turn = FAULTS[fault]
    run_dir = tmp_path / "run"
    session = _session(run_dir, ["a", "b", "c"])
    with session.lifecycle():
        for index, name in enumerate("abc"):
            session.writer.write_group(_group(name, index, turn=turn if name == "b" else None))
            if apart:
                session.writer.flush()
    with open_run(run_dir) as run:
        assert (run.meta["status"], run.meta.get("error")) == ("completed", None)
        rows = {
            row[0]: row[1:]
            for row in run.sql(
                "SELECT rollout_id, termination_reason, error, reward, prompt_tokens, started_at FROM rollouts"
            )
        }
        assert sorted(row[0] for row in run.sql("SELECT group_id FROM groups")) == ["eval/a", "eval/b", "eval/c"]
        for name in "ac":
            for sample in (0, 1):
                assert rows[f"eval/{name}#{sample}"] == ("finished", None, 1.0, 10, 100.0)
        for sample in (0, 1):
            reason, error, reward, prompt, started = rows[f"eval/b#{sample}"]
            assert (reason, reward, prompt, started) == ("harness_error", None, 0, 100.0)
            assert error.startswith(f"the run store could not keep this rollout as it came ({kind}: ")
        transcripts = {record.rollout_id: record for record in run.rollouts()}
        assert transcripts["eval/a#0"].messages[-1]["content"] == "answer a"
        assert transcripts["eval/b#0"].messages == []
        assert run.stats().rollouts == 6
    # the run goes on: resumed, it finds every group stored and writes more
    resumed = RunSession.resume(run_dir)
    assert resumed.writer.completed_groups() == {"eval/a", "eval/b", "eval/c"}
    resumed.add_examples("eval", [Example("d", {"prompt_messages": []})])
    with resumed.lifecycle():
        resumed.writer.write_group(_group("d", 3))
    with open_run(run_dir) as run:
        assert run.meta["status"] == "completed"
        assert run.stats().rollouts == 8


def test_a_fault_of_the_store_itself_fails_the_run_and_says_so(tmp_path: Path) -> None:
    """A rollout id stored in another group: even the failed stand-ins cannot be kept, so the
    writer stops; what it committed stays, and the status is ``failed`` with the error."""
    run_dir = tmp_path / "run"
    session = _session(run_dir, ["a", "b"])
    with pytest.raises(StoreError, match="writing the run store failed"), session.lifecycle():
        session.writer.write_group(_group("a", 0))
        session.writer.flush()
        session.writer.write_group(_group("b", 1, rollout_ids=("eval/a#0",)))
    with open_run(run_dir) as run:
        assert run.meta["status"] == "failed"
        assert "a rollout id of these groups is stored already" in run.meta["error"]
        assert [row[0] for row in run.sql("SELECT group_id FROM groups")] == ["eval/a"]
