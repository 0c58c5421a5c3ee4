"""What a newcomer sees first in the inspector, in real Chromium at 1,400 and 390 px: a mixture's
short ids and per-env provenance, a run that failed its failure-rate check, ISO dates.

The runs are made by the real CLI (``benchmax eval``) against the scripted server.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import playwright.sync_api as playwright_api
import pytest
from browser_kit import InspectorServer, fits, open_view, table_answers

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))

from runkit import ENV_SPEC, answers_policy, row, run_cli, write_split

from benchmax.store import Run, RunQueries
from benchmax.testing import ScriptedServer

expect = playwright_api.expect
EXAMPLES = Path(__file__).parents[2] / "examples"
SHORT = re.compile(r"^(math|format|sql)/[0-9a-f]{8}$")
ISO = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mix-a`` and ``mix-b``: two runs of the README's three-env mixture; ``strict``: a run that
    exits 1 because more rollouts failed than ``--max-failure-rate`` allows."""
    folder = tmp_path_factory.mktemp("first-hour")
    with ScriptedServer(policy=answers_policy) as server:
        for name in ("mix-a", "mix-b"):
            made = run_cli(
                "eval", EXAMPLES / "math", EXAMPLES / "format", EXAMPLES / "sql", "--max-examples", "2",
                "--group-size", "2", "--base-url", server.base_url, "--model", "scripted", "--run-dir",
                folder / name, "--no-progress", timeout=300,
            )  # fmt: skip
            assert made.returncode == 0, made.stdout
        write_split(folder / "data", [row("4", "right"), row("1", "fails", script=[{"status": 400}])])
        strict = run_cli(
            "eval", ENV_SPEC, "--data-dir", folder / "data", "--base-url", server.base_url, "--model", "scripted",
            "--run-dir", folder / "strict", "--no-progress", "--max-failure-rate", "0.1", timeout=300,
        )  # fmt: skip
        assert strict.returncode == 1, strict.stdout
    chat = folder / "chat.jsonl"
    messages = [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris"}]
    chat.write_text(json.dumps({"messages": messages}) + "\n")
    imported = run_cli("import", chat, "--env", EXAMPLES / "format", "-o", folder / "imported")
    assert imported.returncode == 0, imported.stdout
    return folder


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(root)
    yield running
    running.stop()


@pytest.fixture
def phone(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[attr-defined]
    opened = context.new_page()
    opened.errors = []
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()


def _ids(page: object) -> list[tuple[str, str]]:
    """(text, title) of each example id the page shows."""
    ids = page.locator(".id")
    return [(ids.nth(index).inner_text(), ids.nth(index).get_attribute("title") or "") for index in range(ids.count())]


def _example_ids(ids: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(text, title) for text, title in ids if "/" in text and "#" not in text and not text.startswith("eval/")]


@pytest.mark.parametrize("width", [1400, 390])
def test_a_mixtures_run_page_shows_short_ids_env_slash_eight_hex(
    page: object, phone: object, server: InspectorServer, width: int
) -> None:
    view = page if width == 1400 else phone
    open_view(view, server.base + "/runs/mix-a?tab=examples", "run")
    table_answers(view, tab="examples")
    shown = _example_ids(_ids(view))
    assert len(shown) == 6, shown
    for text, title in shown:
        assert SHORT.match(text), shown
        assert title.startswith(text) and len(title) == len(text.split("/")[0]) + 1 + 64, "the title keeps the id"
    if width == 1400:
        fits(view, width)
    assert not view.errors


@pytest.mark.parametrize("width", [1400, 390])
def test_a_mixtures_compare_page_shows_short_ids_and_fits(
    page: object, phone: object, server: InspectorServer, width: int
) -> None:
    view = page if width == 1400 else phone
    open_view(view, server.base + "/compare?a=mix-a&b=mix-b", "compare")
    shown = [text for text, _ in _example_ids(_ids(view))]
    assert shown and all(SHORT.match(text) for text in shown), shown
    assert not [text for text in view.locator("body").inner_text().split() if re.fullmatch(r"\w+/[0-9a-f]{64}", text)]
    fits(view, width)
    assert not view.errors


def test_a_mixtures_provenance_names_each_envs_code_data_and_git_state(
    page: object, server: InspectorServer, root: Path
) -> None:
    with Run(root / "mix-a") as run:
        members = run.meta["provenance"]["members"]
    open_view(page, server.base + "/runs/mix-a", "run")
    panel = page.locator("details.provenance")
    summary = panel.locator("summary").inner_text()
    assert summary.startswith("provenance · 3 envs") and "none" not in summary, summary
    panel.locator("summary").click()
    values = dict(zip(panel.locator("dt").all_text_contents(), panel.locator("dd").all_text_contents(), strict=True))
    assert values["env"] == "mixture of math, format, sql"
    for name, member in members.items():
        assert values[f"{name}: code"].startswith(member["code"]["sha256"][:12]), values
        assert ("not in git" in values[f"{name}: code"]) == (member["git"] is None)
        data_file = member["data"]["files"][0]
        assert values[f"{name}: data"].startswith(f"{data_file['sha256'][:12]} eval.jsonl"), values
    assert not page.errors


def test_a_run_that_failed_its_failure_rate_is_failed_in_the_runs_list_with_iso_dates(
    page: object, server: InspectorServer, root: Path
) -> None:
    with Run(root / "strict") as run:
        assert run.run_meta.status == "completed", "every group ran: nothing is left to resume"
        assert "--max-failure-rate 0.1" in (run.run_meta.error or "")
    open_view(page, server.base + "/", "runs")
    rows = {
        name: page.locator("tbody tr", has=page.locator("a.run-link", has_text=re.compile(f"^{name}$")))
        for name in ("mix-a", "strict")
    }
    strict_badge = rows["strict"].locator(".badge").first
    expect(strict_badge).to_have_text("completed · failed (exit 1)")
    assert "bad" in (strict_badge.get_attribute("class") or "")
    expect(rows["mix-a"].locator(".badge").first).to_have_text(re.compile("^completed"))
    created = rows["strict"].locator("td").nth(4).inner_text()
    assert ISO.search(created), created
    open_view(page, server.base + "/runs/strict", "run")
    assert "--max-failure-rate 0.1" in page.locator("h1").locator("..").inner_text()
    assert not page.errors


def test_a_mixtures_rollout_page_fits_a_phone_with_its_reward_table_whole(
    phone: object, server: InspectorServer, root: Path
) -> None:
    with RunQueries(root / "mix-a") as run:
        rollout = next(r["rollout_id"] for r in run.rollouts(limit=50).rows if r["example_id"].startswith("format/"))
    open_view(phone, f"{server.base}/runs/mix-a/rollouts/{quote(rollout, safe='')}", "rollout")
    fits(phone, 390)
    clipped = phone.evaluate(
        "() => [...document.querySelectorAll('table td, table th')]"
        ".filter((cell) => cell.scrollWidth > cell.clientWidth + 1).map((cell) => cell.textContent)"
    )
    assert clipped == [], "no cell's content is cut off"
    rewards = phone.locator("section.card", has_text="advantage").locator("table.grid")
    seen = rewards.evaluate("(t) => [t.scrollWidth, t.clientWidth, t.getBoundingClientRect().right, innerWidth]")
    assert seen[0] <= seen[1] + 1 and seen[2] <= seen[3], f"the reward table is read whole, not scrolled: {seen}"
    assert SHORT.match(phone.locator("h3 a.id").inner_text())
    assert not phone.errors


def test_an_imported_run_not_yet_scored_shows_no_pass_rate_or_reward_instead_of_zero(
    page: object, server: InspectorServer
) -> None:
    open_view(page, server.base + "/", "runs")
    row = page.locator("tbody tr", has=page.locator("a.run-link", has_text=re.compile("^imported$")))
    expect(row.locator(".badge").first).to_have_text("completed · not scored yet (benchmax rescore)")
    headers = [text.strip() for text in page.locator("table.grid thead th").all_text_contents()]
    cells = row.locator("td").all_text_contents()
    assert cells[headers.index("pass rate")].strip() == "—", dict(zip(headers, cells, strict=False))
    open_view(page, server.base + "/runs/imported?tab=examples", "run")
    table_answers(page, tab="examples")
    headers = [text.strip() for text in page.locator(".tab-area table.grid thead th").all_text_contents()]
    cells = page.locator(".tab-area table.grid tbody tr").first.locator("td").all_text_contents()
    shown = dict(zip(headers, (cell.strip() for cell in cells), strict=False))
    assert shown["pass rate"] == "—" and shown["mean reward"] == "—", shown
    card = page.locator(".card", has_text="pass rate").first.inner_text()
    assert "—" in card and "0.0%" not in card, card
    assert not page.errors
