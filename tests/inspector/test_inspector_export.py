"""``benchmax inspect --export``: a static bundle with every page, and the Typer command."""

from __future__ import annotations

from pathlib import Path

import typer
from inspector_runs import API_KEY, XSS
from typer.testing import CliRunner

from benchmax.cli._inspect import inspect_command
from benchmax.inspector import export_static
from benchmax.inspector.export import file_name
from benchmax.store import RunQueries


def test_export_writes_a_page_per_run_group_and_rollout(runs_dir: Path, tmp_path: Path) -> None:
    index = export_static(runs_dir, tmp_path / "bundle")
    bundle = index.parent
    assert index.exists() and (bundle / "static" / "app.js").exists()
    with RunQueries(runs_dir / "a") as run:
        rollout_ids = [row["rollout_id"] for row in run.rollouts(limit=100).rows]
        group_ids = [row["group_id"] for row in run.groups(limit=100).rows]
    folder = bundle / "runs" / "a"
    assert (folder / "index.html").exists()
    for rollout_id in rollout_ids:
        assert (folder / "rollouts" / f"{file_name(rollout_id)}.html").exists()
    for group_id in group_ids:
        assert (folder / "groups" / f"{file_name(group_id)}.html").exists()
    for page in bundle.rglob("*.html"):
        text = page.read_text()
        assert XSS not in text and "<img" not in text and API_KEY not in text, page


def test_file_names_are_safe_and_distinct() -> None:
    names = [file_name(value) for value in ("eval/x#0", "eval_x#0", "eval.x#0", "../../etc", "é")]
    assert len(set(names)) == len(names)
    assert all(set(name) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.") for name in names)
    assert file_name("eval/x#0") == "eval.2Fx.230"


def test_inspect_command_exports_and_explains_a_missing_path(runs_dir: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("inspect")(inspect_command)
    app.command("other")(lambda: None)
    runner = CliRunner()
    result = runner.invoke(app, ["inspect", str(runs_dir / "a"), "--export", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "runs" / "a" / "index.html").exists()
    missing = runner.invoke(app, ["inspect", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
