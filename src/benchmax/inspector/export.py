"""``benchmax inspect --export DIR``: the inspector as static files, to share or archive.

Each page is the same shell and JS as the live server, with its data embedded, so
the bundle opens from disk (``file://``) or any static host. The run page carries
its whole table, which the browser filters and sorts itself: it applies the
store's one declaration of the tables' parameters (``QUERY_SPEC``), shipped in
the page, so the export answers a URL's filters as the server does. Text search
matches the same words the server's index does: each rollout row carries its
words, folded as the index folds them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from benchmax.inspector import shell
from benchmax.inspector.app import STATIC_DIR, run_overview, with_envs
from benchmax.inspector.catalog import RunCatalog, unscored
from benchmax.store import MAX_IMAGE_URI_CHARS, MAX_PAGE, RunQueries

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def file_name(value: str) -> str:
    """An id as a file name: safe bytes kept, every other byte as ``.XX`` (app.js mirrors this)."""
    return "".join(chr(byte) if byte in _SAFE else f".{byte:02X}" for byte in value.encode("utf-8"))


def export_static(path: str | Path, out_dir: str | Path) -> Path:
    """Write the bundle for the run (or folder of runs) at ``path``; returns ``out_dir/index.html``."""
    catalog = RunCatalog(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(STATIC_DIR, out / "static", dirs_exist_ok=True)
    try:
        runs = catalog.runs()
        summaries = [catalog.summary(run_id) for run_id in runs]
        _page(out / "index.html", "", {"view": "runs", "data": {"root": None, "runs": summaries}})
        for run_id in runs:
            _export_run(catalog, run_id, out / "runs" / file_name(run_id))
    finally:
        catalog.close()
    return out / "index.html"


def _export_run(catalog: RunCatalog, run_id: str, folder: Path) -> None:
    run: RunQueries = catalog.get(run_id)
    overview = run_overview(run, run_id, catalog)
    overview["distributions"] = run.distributions()
    rollouts = _all(lambda offset: run.rollouts(offset=offset, limit=MAX_PAGE, snippet=160))
    words = run.search_words([row["seq"] for row in rollouts])
    for row in rollouts:
        row["words"] = words.get(row["seq"], [])
    examples = _all(lambda offset: run.examples(offset=offset, limit=MAX_PAGE))
    if unscored(overview):  # as the server answers: no example has a rate or a reward yet
        for row in examples:
            row["pass_rate"] = row["mean_reward"] = None
    data = {
        "overview": overview,
        "rollouts": rollouts,
        "examples": examples,
        "groups": _all(lambda offset: run.groups(offset=offset, limit=MAX_PAGE)),
        "steps": run.steps(),
    }
    _page(folder / "index.html", "../../", {"view": "run", "run": run_id, "data": data})
    for group in data["groups"]:
        record = with_envs(run, run.group(group["group_id"]))
        name = file_name(group["group_id"]) + ".html"
        _page(folder / "groups" / name, "../../../", {"view": "group", "run": run_id, "data": record})
    for row in rollouts:
        record = with_envs(run, run.rollout(row["rollout_id"]))
        name = file_name(row["rollout_id"]) + ".html"
        _page(folder / "rollouts" / name, "../../../", {"view": "rollout", "run": run_id, "data": record})


def _all(fetch: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while True:
        page = fetch(len(rows))
        rows.extend(page.rows)
        if not page.rows or len(rows) >= page.total:
            return rows


def _page(target: Path, root: str, boot: dict[str, Any]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    boot = {"mode": "static", "root": root, "image_limit": MAX_IMAGE_URI_CHARS, **boot}
    target.write_text(shell.render(boot, root=root), encoding="utf-8")
