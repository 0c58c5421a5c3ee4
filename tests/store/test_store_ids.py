"""Short example ids: the shortest prefix that names one example, in one run or across the runs a table shows."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from benchmax import open_run
from benchmax.cli._summary import render_summary
from benchmax.store import MIN_SHORT_ID, is_digest

DIGEST = "ab12cd34" + "0" * 56
TWIN = "ab12cd34ef" + "1" * 54  # shares 8 characters with DIGEST
OTHER = "ff00" + "2" * 60


def test_a_digest_is_cut_to_the_minimum_when_no_other_id_shares_its_start(make_run, tmp_path: Path):
    run_dir = make_run(tmp_path / "run", {DIGEST: [{"correct": 1.0}], OTHER: [{"correct": 0.0}]})

    with open_run(run_dir) as run:
        short = run.short_ids([DIGEST, OTHER])

    assert short == {DIGEST: DIGEST[:MIN_SHORT_ID], OTHER: OTHER[:MIN_SHORT_ID]}


def test_a_prefix_grows_until_no_other_example_of_the_run_shares_it(make_run, tmp_path: Path):
    run_dir = make_run(tmp_path / "run", {DIGEST: [{"correct": 1.0}], TWIN: [{"correct": 0.0}]})

    with open_run(run_dir) as run:
        short = run.short_ids([DIGEST, TWIN])

    assert short == {DIGEST: DIGEST[:9], TWIN: TWIN[:9]}
    assert not TWIN.startswith(short[DIGEST]) and not DIGEST.startswith(short[TWIN])


def test_an_id_is_unique_across_every_run_of_the_table(make_run, tmp_path: Path):
    a = make_run(tmp_path / "a", {DIGEST: [{"correct": 1.0}]})
    b = make_run(tmp_path / "b", {DIGEST: [{"correct": 0.0}], TWIN: [{"correct": 0.0}]})

    with open_run(a) as run_a, open_run(b) as run_b:
        alone = run_a.short_ids([DIGEST])
        together = run_a.short_ids([DIGEST], among=[run_b])

    assert alone == {DIGEST: DIGEST[:MIN_SHORT_ID]}
    assert together == {DIGEST: DIGEST[:9]}, "in B the 8-character prefix also names TWIN"


def test_a_mixtures_ids_keep_their_env_and_cut_the_digest_after_it(make_run, tmp_path: Path):
    ids = [f"math/{DIGEST}", f"math/{TWIN}", f"sql/{DIGEST}", f"format/{OTHER}"]
    run_dir = make_run(tmp_path / "run", {name: [{"correct": 1.0}] for name in ids})

    with open_run(run_dir) as run:
        short = run.short_ids(ids)

    assert short == {
        f"math/{DIGEST}": f"math/{DIGEST[:9]}",  # TWIN shares 8 characters within math
        f"math/{TWIN}": f"math/{TWIN[:9]}",
        f"sql/{DIGEST}": f"sql/{DIGEST[:MIN_SHORT_ID]}",
        f"format/{OTHER}": f"format/{OTHER[:MIN_SHORT_ID]}",
    }


def test_ids_a_person_chose_are_shown_whole(make_run, tmp_path: Path):
    chosen = ["gsm8k-train-000012", "q1", "0123456789abcdeZ0123"]
    run_dir = make_run(tmp_path / "run", {name: [{"correct": 1.0}] for name in chosen})

    with open_run(run_dir) as run:
        assert run.short_ids(chosen) == {name: name for name in chosen}
    assert [is_digest(name) for name in (DIGEST, "0123456789abcdef", "0123456789abcde", *chosen)] == [
        True, True, False, False, False, False,
    ]  # fmt: skip


def test_the_summary_lists_each_example_by_its_short_id_on_one_line(make_run, tmp_path: Path):
    run_dir = make_run(tmp_path / "run", {DIGEST: [{"correct": 0.0}], TWIN: [{"correct": 1.0}, {"correct": 0.0}]})
    console = Console(width=80, record=True, color_system=None)

    with open_run(run_dir) as run:
        render_summary(console, run.stats(pass_threshold=1.0))
    text = console.export_text()

    table = text[text.index("pass rate per example") : text.index("samples")]
    rows = [line for line in table.splitlines() if "│" in line]
    assert [row.split("│")[1].strip() for row in rows] == [DIGEST[:9], TWIN[:9]], table
    assert all(len(line) <= 80 for line in table.splitlines())


def test_the_summary_names_each_sample_rollout_by_its_examples_short_id(make_run, tmp_path: Path):
    run_dir = make_run(tmp_path / "run", {DIGEST: [{"correct": 0.0}], TWIN: [{"correct": 1.0}]})
    console = Console(width=80, record=True, color_system=None)

    with open_run(run_dir) as run:
        render_summary(console, run.stats(pass_threshold=1.0))
    text = console.export_text()

    heads = [line.strip() for line in text.splitlines() if line.startswith(("  passed", "  not passed"))]
    assert [head.split()[-1] for head in heads] == [f"eval/{TWIN[:9]}#0", f"eval/{DIGEST[:9]}#0"], text
