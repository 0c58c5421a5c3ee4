"""Each rollout knows its env: the store's ``examples.env``, every record and export that carries
it, old files without the column, and the batch zero-fill kept inside an env (#33.2, #33.3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from runkit import ENV_SPEC, row, write_split
from v1_store import downgrade

from benchmax import open_run
from benchmax.envs import Example, RolloutOutcome, SamplingParams
from benchmax.runner import RunConfig, arun
from benchmax.store import EnvFigures, GroupWrite, RunWriter, diff_runs, export_run, read_jsonl_export

SUITE_SPEC = f"{Path(__file__).parents[1] / 'runner' / 'support' / 'suite_env.py'}:SuiteEnv"


def suite_rows() -> list[dict]:
    """Two math examples (one with ``format``), a failing math one, two code examples (one failing)."""
    return [
        {**row("4", "math one"), "env": "math", "format": 1.0},
        {**row("5", "math two", answers=["5", "6"]), "env": "math"},
        {**row("7", "math fails", script=[{"status": 400}]), "env": "math"},
        {**row("ok", "code one"), "env": "code"},
        {**row("ok", "code fails", script=[{"status": 400}]), "env": "code"},
    ]


@pytest.fixture
async def suite_run(tmp_path: Path, server) -> Path:
    write_split(tmp_path / "data", suite_rows())
    config = RunConfig(
        env=SUITE_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted", group_size=2,
        run_dir=tmp_path / "suite", sampling=SamplingParams(seed=3),
    )  # fmt: skip
    await arun(config)
    return tmp_path / "suite"


def test_every_record_of_a_run_of_two_envs_carries_its_env(suite_run):
    with open_run(suite_run) as run:
        records = list(run.rollouts())
        groups = run.groups()
        one = run.rollout(records[-1].rollout_id)

    assert len(records) == 10
    assert {record.example_id: record.env for record in records} == {
        "math/0": "math", "math/1": "math", "math/2": "math", "code/3": "code", "code/4": "code",
    }  # fmt: skip
    assert {group.example_id: group.env for group in groups} == {r.example_id: r.env for r in records}
    assert one.env == records[-1].env == "code"
    assert records[0].to_dict()["env"] == "math"


def test_the_zero_fill_of_a_run_of_two_envs_stays_inside_each_env(suite_run):
    with open_run(suite_run) as run:
        records = list(run.rollouts())

    by_example = {}
    for record in records:
        by_example.setdefault(record.example_id, []).append(record)
    # math: format is filled among math rollouts, never exact/format into code rollouts
    assert sorted(r.rewards["exact"] for r in by_example["math/1"]) == [0.0, 1.0]
    assert all(r.filled == {"format"} and r.rewards["format"] == 0.0 for r in by_example["math/1"])
    assert all(r.filled == {"exact", "format"} and r.reward == 0.0 for r in by_example["math/2"])
    assert all(r.rewards == {"tests_passed": 1.0} and not r.filled for r in by_example["code/3"])
    assert all(r.rewards == {"tests_passed": 0.0} and r.filled == {"tests_passed"} for r in by_example["code/4"])
    for record in records:
        emitted = {"math": {"exact", "format"}, "code": {"tests_passed"}}[record.env]
        assert set(record.rewards) <= emitted, record


def test_exports_carry_each_rollouts_env(suite_run, tmp_path):
    with open_run(suite_run) as run:
        export_run(run, tmp_path / "out.jsonl")
        export_run(run, tmp_path / "out.parquet", "parquet")
        envs = {record.rollout_id: record.env for record in run.rollouts()}

    lines = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert {line["rollout_id"]: line["env"] for line in lines} == envs
    assert {record.rollout_id: record.env for record in read_jsonl_export(tmp_path / "out.jsonl")} == envs
    table = pq.read_table(tmp_path / "out.parquet").to_pydict()
    assert dict(zip(table["rollout_id"], table["env"], strict=True)) == envs


async def test_a_run_of_one_env_names_its_env_by_the_spec_it_ran(tmp_path, server):
    write_split(tmp_path / "data", [row("4", bonus=0.5), row("5", answers=["6"])])
    run_dir = tmp_path / "one"
    await arun(
        RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted", run_dir=run_dir)
    )
    with open_run(run_dir) as run:
        records = list(run.rollouts())
        groups = run.groups()
        stored = run.sql("SELECT DISTINCT env FROM examples")
        export_run(run, tmp_path / "one.jsonl")

    assert stored == [(None,)]  # a one-env run stores no env per example: its metadata names it
    assert {record.env for record in records} == {group.env for group in groups} == {ENV_SPEC}
    assert {orjson.loads(line)["env"] for line in (tmp_path / "one.jsonl").read_bytes().splitlines()} == {ENV_SPEC}


def _old_layout_2(make_run, path: Path) -> Path:
    """A layout-2 run as benchmax wrote it before ``examples.env``: the column dropped (and the
    per-env sums kept since, which came later still)."""
    make_run(path, {"e1": [{"correct": 1.0}], "e2": [{}]})
    conn = sqlite3.connect(path / "run.sqlite")
    conn.execute("INSERT INTO meta (key, value) VALUES ('env_class', '\"pkg.Old\"')")
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE env_totals")
    conn.execute("DROP TABLE env_components")
    conn.execute("DROP INDEX examples_by_env")
    conn.execute("ALTER TABLE examples DROP COLUMN env")
    conn.commit()
    conn.close()
    return path


def _columns(path: Path) -> list[str]:
    conn = sqlite3.connect(path / "run.sqlite")
    try:
        return [name for (name,) in conn.execute("SELECT name FROM pragma_table_info('examples')")]
    finally:
        conn.close()


@pytest.mark.parametrize("layout", [1, 2])
def test_a_file_written_before_the_env_column_reads_and_resumes(tmp_path, make_run, layout):
    old = _old_layout_2(make_run, tmp_path / "old2")
    if layout == 1:
        old = downgrade(old, tmp_path / "old1")
    assert "env" not in _columns(old)

    with open_run(old) as run:
        assert {record.env for record in run.rollouts()} == {"pkg.Old"}
        assert {group.env for group in run.groups()} == {"pkg.Old"}

    with open_run(old) as run:
        assert run.envs() == ("pkg.Old",) and run.stats().envs == ()

    writer = RunWriter.resume(old)
    writer.add_examples("eval", [Example("m/new", {"prompt_messages": []}, env="math")])
    writer.close()
    assert "env" in _columns(old)
    with open_run(old) as run:
        assert {record.env for record in run.rollouts()} == {"pkg.Old"}
        assert run.sql("SELECT example_id, env FROM examples WHERE env IS NOT NULL") == [("m/new", "math")]


# -- the zero-fill inside an env: env x fill x resume ---------------------------------------------

_EMITS = {"math": {"exact", "format"}, "code": {"tests_passed"}}


def _outcome(example_id: str, sample: int, rewards: dict[str, float]) -> RolloutOutcome:
    return RolloutOutcome(
        rewards=rewards,
        termination_reason="finished" if rewards else "model_error",
        error=None if rewards else "HTTP 503",
        rollout_id=f"eval/{example_id}#{sample}",
        example_id=example_id,
        split="eval",
        messages=[{"role": "user", "content": example_id}],
    )


def _write(writer: RunWriter, index: int, example_id: str, rewards: list[dict[str, float]]) -> None:
    outcomes = tuple(_outcome(example_id, sample, values) for sample, values in enumerate(rewards))
    writer.write_group(GroupWrite(f"eval/{example_id}", example_id, index, 0, outcomes, tuple(range(len(outcomes)))))


@pytest.mark.parametrize("resume", [False, True], ids=["one-session", "resumed"])
@pytest.mark.parametrize("fill", [True, False], ids=["filled", "unfilled"])
def test_the_fill_matrix_never_crosses_envs(tmp_path, fill, resume):
    examples = [
        Example("m/a", {"prompt_messages": []}, env="math"),
        Example("m/b", {"prompt_messages": []}, env="math"),
        Example("c/a", {"prompt_messages": []}, env="code"),
        Example("c/b", {"prompt_messages": []}, env="code"),
        Example("m/c", {"prompt_messages": []}, env="math"),
        Example("c/c", {"prompt_messages": []}, env="code"),
    ]
    writer = RunWriter.create(tmp_path / "run", {"started_at": 0.0})
    writer.sync_examples("eval", examples, resume=False)
    _write(writer, 0, "m/a", [{"exact": 1.0, "format": 1.0}, {"exact": 0.0}])
    _write(writer, 1, "m/b", [{}])
    _write(writer, 2, "c/a", [{"tests_passed": 1.0}])
    _write(writer, 3, "c/b", [{}])
    if fill:
        writer.fill_batch(0)
    if resume:
        writer.close()
        writer = RunWriter.resume(tmp_path / "run")
        _write(writer, 4, "m/c", [{}])
        _write(writer, 5, "c/c", [{"tests_passed": 0.5}, {}])
    for batch in writer.unfilled_batches() if fill or resume else ():
        writer.fill_batch(batch)
    writer.close()

    with open_run(tmp_path / "run") as run:
        records = {record.rollout_id: record for record in run.rollouts()}
        cross = run.sql(
            "SELECT r.rollout_id, w.component FROM rewards AS w JOIN rollouts AS r ON r.seq = w.seq"
            " JOIN examples AS e ON e.example_id = r.example_id WHERE w.filled = 1"
            " AND w.component NOT IN (SELECT w2.component FROM rewards AS w2 JOIN rollouts AS r2 ON r2.seq = w2.seq"
            " JOIN examples AS e2 ON e2.example_id = r2.example_id WHERE w2.filled = 0 AND e2.env = e.env)"
        )
    assert cross == []
    for record in records.values():
        assert set(record.rewards) <= _EMITS[record.env], record
    filled = {rollout_id: set(record.filled) for rollout_id, record in records.items()}
    if not (fill or resume):
        assert all(not names for names in filled.values())
        assert records["eval/m/b#0"].reward is None and records["eval/c/b#0"].reward is None
        return
    assert filled["eval/m/a#1"] == {"format"}
    assert filled["eval/m/b#0"] == {"exact", "format"} and records["eval/m/b#0"].reward == 0.0
    assert filled["eval/c/b#0"] == {"tests_passed"} and records["eval/c/b#0"].reward == 0.0
    assert not filled["eval/c/a#0"] and not filled["eval/m/a#0"]
    if resume:
        assert filled["eval/m/c#0"] == {"exact", "format"}
        assert filled["eval/c/c#1"] == {"tests_passed"} and not filled["eval/c/c#0"]


# -- per-env figures -------------------------------------------------------------------------------


def test_the_suite_of_a_run_of_two_envs_has_one_row_per_env(suite_run):
    with open_run(suite_run) as run:
        suite = run.suite()
        envs = run.envs()

    assert envs == ("code", "math")
    code, math = suite
    assert code == EnvFigures("code", 4, 2, 2, 2, 0, 2, {"tests_passed": 0.5})
    assert (math.env, math.rollouts, math.failed, math.passed, math.groups) == ("math", 6, 2, 3, 3)
    assert (math.groups_with_signal, math.groups_no_signal, math.scored, math.pass_rate) == (1, 2, 4, 0.5)
    assert math.components == {"exact": pytest.approx(0.5), "format": pytest.approx(1 / 3)}


def test_a_component_two_envs_emit_is_averaged_per_env_only(tmp_path):
    writer = RunWriter.create(tmp_path / "run", {"started_at": 0.0})
    writer.sync_examples(
        "eval", [Example("a/1", {"prompt_messages": []}, env="a"), Example("b/1", {"prompt_messages": []}, env="b")],
        resume=False,
    )  # fmt: skip
    _write(writer, 0, "a/1", [{"exact": 1.0}, {"exact": 1.0}])
    _write(writer, 1, "b/1", [{"exact": 0.0}, {}])
    writer.fill_batch(0)
    writer.close()
    with open_run(tmp_path / "run") as run:
        suite = {figures.env: figures.components for figures in run.suite()}

    assert suite == {"a": {"exact": 1.0}, "b": {"exact": 0.0}}


async def test_a_run_of_one_env_is_a_suite_of_one_row_named_by_its_spec(tmp_path, server):
    write_split(tmp_path / "data", [row("4", bonus=0.5), row("5", answers=["6"])])
    await arun(
        RunConfig(env=ENV_SPEC, data_dir=tmp_path / "data", base_url=server.base_url, model="scripted",
                  run_dir=tmp_path / "one")
    )  # fmt: skip
    with open_run(tmp_path / "one") as run:
        (only,) = run.suite()
        stats = run.stats()

    assert only.env == ENV_SPEC and only.rollouts == stats.rollouts and only.passed == stats.passed
    assert only.components == {name: pytest.approx(figures.mean) for name, figures in stats.components.items()}


async def test_diff_compares_each_env_of_two_suites(suite_run, tmp_path, server):
    rows = suite_rows()
    rows[4] = {**row("ok", "code fixed"), "env": "code"}
    write_split(tmp_path / "data2", rows)
    await arun(
        RunConfig(env=SUITE_SPEC, data_dir=tmp_path / "data2", base_url=server.base_url, model="scripted",
                  group_size=2, run_dir=tmp_path / "suite2", sampling=SamplingParams(seed=3))
    )  # fmt: skip
    with open_run(suite_run) as a, open_run(tmp_path / "suite2") as b:
        result = diff_runs(a, b)

    assert result.several_envs
    code, math = result.envs
    assert (code.env, code.pass_delta, code.component("tests_passed")) == ("code", 0.5, (0.5, 1.0))
    assert (math.env, math.pass_delta, math.component("exact")) == ("math", 0.0, (0.5, 0.5))
    assert code.component("exact") == (None, None) and code.component_names == ("tests_passed",)


# -- stored groups read whole (what rescore reads) ------------------------------------------------


def test_stored_groups_come_whole_with_their_example_env_and_rollouts_in_sample_order(tmp_path):
    writer = RunWriter.create(tmp_path / "run", {"started_at": 0.0, "config": {"env": "pkg.env:Mixed"}})
    writer.sync_examples(
        "eval", [Example("m/a", {"q": 1}, env="math"), Example("c/a", {"q": 2}, env="code")], resume=False
    )
    outcomes = (_outcome("m/a", 1, {"exact": 1.0}), _outcome("m/a", 0, {"exact": 0.0}))
    writer.write_group(GroupWrite("eval/m/a", "m/a", 0, 0, outcomes, (1, 0)))
    _write(writer, 1, "c/a", [{"tests_passed": 1.0}])
    writer.write_group(GroupWrite("eval/unstored", "unstored", 2, 0, (_outcome("unstored", 0, {"x": 1.0}),), (0,)))
    writer.close()

    with open_run(tmp_path / "run") as run:
        ranges = run.group_ranges(2)
        groups = [group for first, last in ranges for group in run.stored_groups(first, last)]

    assert ranges == [(0, 2), (3, 3)]
    assert [(group.group.group_id, group.group.env) for group in groups] == [
        ("eval/m/a", "math"),
        ("eval/c/a", "code"),
        ("eval/unstored", "pkg.env:Mixed"),  # no example of its own: the run's env names it
    ]
    assert [(group.example.id, group.example.payload, group.example.env) for group in groups[:2]] == [
        ("m/a", {"q": 1}, "math"),
        ("c/a", {"q": 2}, "code"),
    ]
    assert groups[2].example is None
    first = groups[0]
    assert [record.sample_index for record in first.rollouts] == [0, 1]
    assert [record.rollout_id for record in first.rollouts] == ["eval/m/a#0", "eval/m/a#1"]
    assert first.seqs == (1, 0)  # stored in the order they came, read in sample order
    assert [record.rewards for record in first.rollouts] == [{"exact": 0.0}, {"exact": 1.0}]
    assert {record.env for group in groups[:2] for record in group.rollouts} == {"math", "code"}
