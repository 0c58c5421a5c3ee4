"""What a person reads on each page, at a 390 px phone and a 1400 px desktop (issue 32, items 2 and 9).

Short example ids in every table and heading (full ids stay in links), histogram labels
that do not overlap, env names that wrap only between their parts, no empty headings,
group logs without a turn, and a component only one run has shown as new.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import playwright.sync_api as playwright_api
import pytest
from browser_kit import InspectorServer, open_view, table_answers
from inspector_runs import InspectEnv

import benchmax
from benchmax.testing import ScriptedServer

WIDTHS = (390, 1400)
HEX64 = re.compile(r"[0-9a-f]{64}")
logger = logging.getLogger("tests.inspector.group")


class GroupLogEnv(InspectEnv):
    """InspectEnv with a group hook that logs and adds a ``rank`` component (absent from run ``a``)."""

    async def compute_group_rewards(self, rollouts: Any) -> dict[str, dict[str, float]]:
        logger.info("ranking %d siblings", len(rollouts))
        return {rollout.rollout_id: {"rank": float(index)} for index, rollout in enumerate(rollouts)}


@pytest.fixture(scope="module")
def readable_dir(runs_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run ``a`` and run ``ranked`` (same dataset, a group hook that logs and adds ``rank``)."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path_factory.mktemp("readable")
    shutil.copytree(runs_dir / "a", root / "a")

    def build() -> None:
        with ScriptedServer() as server:
            benchmax.evaluate(GroupLogEnv(), base_url=server.base_url, model="scripted", group_size=3,
                              run_dir=root / "ranked")  # fmt: skip

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API may hold an event loop in this thread
        pool.submit(build).result()
    return root


@pytest.fixture(scope="module")
def server(readable_dir: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(readable_dir)
    yield running
    running.stop()


@pytest.fixture(params=WIDTHS, ids=lambda width: f"{width}px")
def page(request: pytest.FixtureRequest, browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    opened = context.new_page()
    opened.errors = []
    opened.width = request.param
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()


def _shot(page: Any, name: str) -> None:
    """docs/ keeps the screenshots when BENCHMAX_INSPECTOR_SCREENSHOTS names it."""
    import os

    folder = os.environ.get("BENCHMAX_INSPECTOR_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}-{page.width}.png"), full_page=True)


_OVERLAPS = """() => {
  const found = [];
  for (const chart of document.querySelectorAll('svg.hist')) {
    const boxes = [...chart.querySelectorAll('text')].map((t) => t.getBoundingClientRect()).filter((b) => b.width > 0);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i], boxes[j]];
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
        found.push(chart.getAttribute('aria-label'));
    }
  }
  return found;
}"""

_LINE_BREAKS = """(el) => {
  // the characters after which the browser wrapped the text onto a new line
  const text = el.textContent;
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const tops = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      tops.push(rect ? Math.round(rect.top) : null);
    }
  }
  const after = [];
  for (let i = 1; i < tops.length; i++) {
    if (tops[i] !== null && tops[i - 1] !== null && tops[i] > tops[i - 1]) after.push(text[i - 1]);
  }
  return after;
}"""


def test_the_run_page_shows_short_ids_linked_to_full_ones_with_the_answer_in_view(
    page: Any, server: InspectorServer
) -> None:
    open_view(page, server.base + "/runs/a", "run")
    table_answers(page)
    page.wait_for_selector("text=latency per rollout")
    table = page.locator(".tab-area table.grid")
    assert not HEX64.search(table.inner_text())
    links = table.locator("tbody a.id")
    assert links.count() == 15
    for index in range(links.count()):
        link = links.nth(index)
        full = unquote(link.get_attribute("href").rsplit("/", 1)[-1])
        assert HEX64.search(full) and link.get_attribute("title") == full
        assert link.inner_text() != full and len(link.inner_text()) < 30
    # the id cell stays on one line, so the answer column is on screen at the desktop width
    height = page.evaluate("(el) => el.getBoundingClientRect().height", links.first.element_handle())
    assert height < 30, height
    if page.width == 1400:
        answer = page.locator(".tab-area th", has_text="final answer").bounding_box()
        assert answer["x"] + answer["width"] <= 1400
    assert page.evaluate(_OVERLAPS) == []
    _shot(page, "inspector-run")
    for tab in ("groups", "examples"):
        open_view(page, f"{server.base}/runs/a?tab={tab}", "run")
        table_answers(page, tab=tab)
        assert not HEX64.search(page.locator(".tab-area table.grid").inner_text()), tab
    assert not page.errors


def test_group_page_short_ids_no_empty_answer_heading_and_group_logs_without_a_turn(
    page: Any, server: InspectorServer
) -> None:
    from benchmax.store import RunQueries

    with RunQueries(server_root(server) / "ranked") as run:
        failed = run.rollouts(sort="seq", limit=50).rows
    group_id = next(row["group_id"] for row in failed if row["termination_reason"] == "model_error")
    open_view(page, f"{server.base}/runs/ranked/groups/{quote(group_id, safe='')}", "group")
    assert not HEX64.search(page.locator("section.head").inner_text())
    assert page.locator("section.head .id").get_attribute("title") == group_id
    # the failed siblings answered nothing: no "final answer" heading over an empty box
    siblings = page.locator("article.sibling")
    assert siblings.count() == 3
    for index in range(siblings.count()):
        sibling = siblings.nth(index)
        if sibling.locator(".label", has_text="final answer").count():
            assert sibling.locator("pre.text").first.inner_text().strip()
    assert siblings.locator(".label", has_text="final answer").count() == 0
    answered = group_id.replace(failed_example(failed), ok_example(failed))
    open_view(page, f"{server.base}/runs/ranked/groups/{quote(answered, safe='')}", "group")
    logs = page.locator("section.card", has_text="group logs")
    assert "ranking 3 siblings" in logs.inner_text()
    assert "turn" not in logs.locator(".log-head").first.inner_text()
    assert siblings.locator(".label", has_text="final answer").count() == 3
    _shot(page, "inspector-group")
    assert not page.errors


def test_env_names_wrap_between_parts_and_compare_marks_a_new_component(page: Any, server: InspectorServer) -> None:
    open_view(page, server.base + "/", "runs")
    names = page.locator("table.grid span.env")
    assert names.count() >= 2
    for index in range(names.count()):
        breaks = page.evaluate(_LINE_BREAKS, names.nth(index).element_handle())
        assert all(char in "./:\\" for char in breaks), (names.nth(index).inner_text(), breaks)
    open_view(page, f"{server.base}/compare?a=a&b=ranked", "compare")
    component = page.locator("table.grid").first
    rank = component.locator("tr", has_text="rank")
    assert "new" in rank.locator("td").last.inner_text()
    assert not HEX64.search(page.locator("table.grid").nth(1).inner_text())
    assert page.evaluate(_OVERLAPS) == []
    _shot(page, "inspector-compare")
    assert not page.errors


def server_root(server: InspectorServer) -> Path:
    return Path(server.server.config.app.state.catalog.root)


def failed_example(rows: list[dict[str, Any]]) -> str:
    return next(row["example_id"] for row in rows if row["termination_reason"] == "model_error")


def ok_example(rows: list[dict[str, Any]]) -> str:
    return next(row["example_id"] for row in rows if row["termination_reason"] == "finished")


def test_training_steps_are_numbered_as_the_terminal_numbers_them_and_lines_are_not_filled(
    page: Any, tmp_path: Path
) -> None:
    from inspector_runs import write_training_run

    write_training_run(tmp_path / "train")
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/train", "run")
        rows = page.locator("table.grid tbody tr")
        playwright_api.expect(rows).to_have_count(3)
        # the terminal prints "step 1/3".."step 3/3"; each links to the rollouts it trained on (stored 0..2)
        links = [rows.nth(index).locator("a").first for index in range(3)]
        assert [link.inner_text() for link in links] == ["1", "2", "3"]
        assert [link.get_attribute("href") for link in links] == [f"?tab=rollouts&step={n}" for n in range(3)]
        fills = page.evaluate(
            "() => [...document.querySelectorAll('svg.hist polyline')].map((line) => getComputedStyle(line).fill)"
        )
        assert fills and set(fills) == {"none"}
        assert page.locator("svg.hist polygon.area").count() == len(fills)
        assert "step 1" in page.locator(".tab-area figure.chart").first.inner_text()
        assert not page.errors
    finally:
        served.stop()


def test_tab_labels_stay_whole_words_on_one_line(page: Any, server: InspectorServer, tmp_path: Path) -> None:
    from inspector_runs import write_training_run

    write_training_run(tmp_path / "train")  # a training run has the most tabs
    served = InspectorServer(tmp_path)
    try:
        for base, run in ((server.base, "a"), (served.base, "train")):
            open_view(page, f"{base}/runs/{run}", "run")
            page.wait_for_selector(".tabs button")
            tabs = page.locator(".tabs button")
            assert tabs.count() >= 3
            for index in range(tabs.count()):
                tab = tabs.nth(index)
                assert tab.evaluate(_LINE_BREAKS) == [], f"the tab {tab.inner_text()!r} wraps at {page.width} px"
        assert page.errors == []
    finally:
        served.stop()
