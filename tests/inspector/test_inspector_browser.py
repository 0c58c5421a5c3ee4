"""The inspector driven in real headless Chromium (Debian's ``chromium``, through Playwright).

Screenshots of the main pages land in ``$BENCHMAX_INSPECTOR_SCREENSHOTS`` when set
(``docs/`` keeps the ones the README shows), else in a temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import playwright.sync_api as playwright_api
import pytest
import uvicorn
from inspector_runs import write_synthetic_groups, write_training_run

from benchmax.inspector import create_app
from benchmax.inspector.server import bind
from benchmax.store import RunWriter

expect = playwright_api.expect
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.fail("the browser tests need Debian's chromium: apt-get install -y chromium", pytrace=False)

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class _Server:
    """A real uvicorn server on a free loopback port, in a thread."""

    def __init__(self, root: Path) -> None:
        sock = bind("127.0.0.1", 0)
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(root), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the inspector did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(runs_dir: Path) -> Iterator[_Server]:
    running = _Server(runs_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    opened = context.new_page()
    opened.dialogs = []
    opened.errors = []
    opened.on("dialog", lambda dialog: (opened.dialogs.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("BENCHMAX_INSPECTOR_SCREENSHOTS")
    folder = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open(page: object, url: str, view: str) -> None:
    page.goto(url)  # type: ignore[attr-defined]
    page.wait_for_selector(f"body[data-ready={view}]", timeout=15000)  # type: ignore[attr-defined]


def test_runs_list_compares_two_runs(page: object, server: _Server, shots: Path) -> None:
    _open(page, server.base + "/", "runs")
    assert sorted(page.locator("a.run-link").all_text_contents()) == ["a", "b"]
    page.screenshot(path=str(shots / "inspector-runs.png"))
    page.get_by_label("select a").check()
    page.get_by_label("select b").check()
    page.get_by_role("button", name="Compare selected").click()
    page.wait_for_selector("body[data-ready=compare]")
    assert "+0.2" in page.locator("table.grid").first.inner_text()
    page.screenshot(path=str(shots / "inspector-compare.png"), full_page=True)
    assert not page.errors


def test_run_page_filters_sorts_and_opens_a_group(page: object, server: _Server, shots: Path) -> None:
    _open(page, server.base + "/runs/a", "run")
    page.wait_for_selector("text=latency per rollout")
    assert page.locator("table.grid tbody tr").count() == 15
    page.screenshot(path=str(shots / "inspector-run.png"), full_page=True)

    page.select_option("select[name=reason]", "model_error")
    expect(page.locator("table.grid tbody tr")).to_have_count(3)
    assert "reason=model_error" in page.url
    page.select_option("select[name=reason]", "")
    page.fill("input[name=q]", "window.__xss")
    expect(page.locator("table.grid tbody tr")).to_have_count(3)
    page.fill("input[name=q]", "")
    expect(page.locator("table.grid tbody tr")).to_have_count(15)

    page.locator("th", has_text="reward").first.click()
    expect(page).to_have_url(re.compile("desc=1"))
    rewards = [float(text) for text in page.locator("table.grid tbody tr td:nth-child(5)").all_text_contents()]
    assert rewards == sorted(rewards, reverse=True)

    page.locator("a", has_text="group · 0").first.click()
    page.wait_for_selector("body[data-ready=group]")
    assert page.locator("article.sibling").count() == 3
    assert "advantage" in page.locator("article.sibling").first.inner_text().lower()
    assert not page.errors


def test_group_and_rollout_views_show_advantages_logs_and_tracebacks(
    page: object, server: _Server, runs_dir: Path, shots: Path
) -> None:
    from benchmax.store import RunQueries

    with RunQueries(runs_dir / "a") as run:
        row = run.rollouts(sort="num_tool_calls", descending=True, limit=1).rows[0]
    _open(page, f"{server.base}/runs/a/groups/{quote(row['group_id'], safe='')}", "group")
    advantages = page.locator(".sib-figures .big").all_text_contents()[1::2]
    assert sorted(advantages) == ["+1.414", "-0.707", "-0.707"]
    page.screenshot(path=str(shots / "inspector-group.png"), full_page=True)

    page.locator("a", has_text="open rollout").first.click()
    page.wait_for_selector("body[data-ready=rollout]")
    transcript = page.locator(".transcript")
    tools_logs = transcript.locator(".logs", has_text="during the tool calls of turn 0")
    assert tools_logs.locator(".log").count() == 2
    assert "conftest.py" not in tools_logs.inner_text() and "inspector_runs.py:" in tools_logs.inner_text()
    tools_logs.locator("summary", has_text="traceback").click()
    assert "the tool tripped on purpose" in tools_logs.inner_text()
    assert transcript.locator(".logs", has_text="while scoring").count() == 1
    assert page.locator(".tool-call").first.inner_text().count('"a": 1') == 1
    page.screenshot(path=str(shots / "inspector-rollout.png"), full_page=True)

    page.select_option("select[aria-label='minimum log level']", "40")
    assert transcript.locator(".log:visible").count() == 1
    assert "zero-filled" not in page.locator("section.card").first.inner_text()
    page.locator("a.button", has_text="next sibling").click()
    page.wait_for_selector("body[data-ready=rollout]")
    assert page.url.endswith(quote(row["group_id"], safe="") + "%231")
    assert not page.errors


def test_a_script_payload_in_a_model_reply_stays_inert_text(page: object, server: _Server, runs_dir: Path) -> None:
    from benchmax.store import RolloutFilter, RunQueries

    with RunQueries(runs_dir / "a") as run:
        row = run.rollouts(RolloutFilter(text="window.__xss"), limit=1).rows[0]
    for url, view in (
        (f"{server.base}/runs/a?q=window.__xss", "run"),
        (f"{server.base}/runs/a/groups/{quote(row['group_id'], safe='')}", "group"),
        (f"{server.base}/runs/a/rollouts/{quote(row['rollout_id'], safe='')}", "rollout"),
    ):
        _open(page, url, view)
        page.wait_for_timeout(300)
        assert page.evaluate("window.__xss") is None, url
        assert page.locator("#injected").count() == 0, url
        assert page.locator("img[src=x]").count() == 0, url
        assert page.locator("main script").count() == 0, url
        assert "onerror" in page.locator("main").inner_text(), url
    assert page.dialogs == [] and not page.errors


def test_new_rollouts_appear_while_the_run_is_being_written(page: object, tmp_path: Path) -> None:
    writer = RunWriter.create(tmp_path / "live", {"status": "running", "model": "m", "pass_threshold": 1.0})
    live = _Server(tmp_path)
    try:
        write_synthetic_groups(writer, 0, 3)
        _open(page, live.base + "/runs/live", "run")
        assert page.locator("table.grid tbody tr").count() == 6
        expect(page.locator("#live")).to_be_visible()
        write_synthetic_groups(writer, 3, 2)
        expect(page.locator("table.grid tbody tr")).to_have_count(10, timeout=15000)
        assert "10" in page.locator(".stat", has_text="rollouts").first.inner_text()
    finally:
        writer.close()
        live.stop()


def test_the_static_export_opens_from_disk(page: object, runs_dir: Path, tmp_path: Path) -> None:
    from benchmax.inspector import export_static

    index = export_static(runs_dir, tmp_path / "bundle")
    _open(page, index.as_uri(), "runs")
    page.locator("a.run-link", has_text="a").click()
    page.wait_for_selector("body[data-ready=run]")
    expect(page.locator("table.grid tbody tr")).to_have_count(15)
    page.select_option("select[name=reason]", "model_error")
    expect(page.locator("table.grid tbody tr")).to_have_count(3)
    page.locator("a.id").first.click()
    page.wait_for_selector("body[data-ready=rollout]")
    assert "model_error" in page.locator("h1").inner_text()
    assert page.evaluate("window.__xss") is None and not page.errors


def test_token_ids_and_logprobs_show_in_a_token_view(page: object, tmp_path: Path) -> None:
    writer = RunWriter.create(tmp_path / "tokens", {"status": "completed", "model": "m"})
    write_synthetic_groups(writer, 0, 1, tokens=True)
    writer.close()
    served = _Server(tmp_path)
    try:
        _open(page, f"{served.base}/runs/tokens/rollouts/{quote('eval/live0000#0', safe='')}", "rollout")
        chips = page.locator(".tokens .tok")
        expect(chips).to_have_count(3)
        assert chips.all_text_contents() == ["101", "102", "103"]
        assert "logprob -2.5000" in chips.nth(1).get_attribute("title")
    finally:
        served.stop()


def test_a_training_run_opens_on_its_steps_and_a_step_links_to_its_rollouts(page: object, tmp_path: Path) -> None:
    write_training_run(tmp_path / "train")
    served = _Server(tmp_path)
    try:
        _open(page, f"{served.base}/runs/train", "run")
        rows = page.locator("table.grid tbody tr")
        expect(rows).to_have_count(3)
        assert "1 mismatched" in rows.nth(2).inner_text()
        assert "1 / 3" in rows.nth(0).inner_text()
        assert page.locator("figure.chart", has_text="dead-group share").count() == 1
        rows.nth(1).locator("a").first.click()
        expect(page.locator("table.grid tbody tr")).to_have_count(2)
        assert all("step1/" in text for text in page.locator("a.id").all_text_contents())
        assert not page.errors
    finally:
        served.stop()


def _ids(page: object, url: str, view: str = "run") -> list[str]:
    _open(page, url, view)
    page.wait_for_selector("table.grid")  # type: ignore[attr-defined]
    return page.locator("table.grid tbody a.id").all_text_contents()  # type: ignore[attr-defined]


def test_the_static_export_answers_every_table_query_as_the_server_does(
    page: object, server: _Server, runs_dir: Path, tmp_path: Path
) -> None:
    from benchmax.inspector import export_static

    bundle = export_static(runs_dir, tmp_path / "bundle").parent
    api = httpx.Client(base_url=server.base)
    rollouts = api.get("/api/runs/a/rollouts", params={"limit": 500}).json()["rows"]
    example = rollouts[0]["example_id"]
    group = rollouts[4]["group_id"]
    word = rollouts[0]["final_text"].split()[0]
    queries = [
        {"tab": "rollouts"},
        {"tab": "rollouts", "reason": "finished"},
        {"tab": "rollouts", "reason": "model_error"},
        {"tab": "rollouts", "failed": "1"},
        {"tab": "rollouts", "failed": "0", "sort": "reward", "desc": "1"},
        {"tab": "rollouts", "example": example},
        {"tab": "rollouts", "group": group},
        {"tab": "rollouts", "c": "correct", "cmin": "1"},
        {"tab": "rollouts", "c": "format", "cmax": "0.3", "sort": "seconds"},
        {"tab": "rollouts", "q": word},
        {"tab": "rollouts", "q": example[:12]},
        {"tab": "rollouts", "sort": "c:format", "desc": "1"},
        {"tab": "rollouts", "sort": "num_turns"},
        {"tab": "rollouts", "sort": "final_text", "desc": "1", "limit": "25", "offset": "5"},
        {"tab": "groups"},
        {"tab": "groups", "no_signal": "1"},
        {"tab": "groups", "sort": "std", "desc": "1"},
        {"tab": "groups", "sort": "order", "desc": "1"},
        {"tab": "groups", "example": example},
        {"tab": "examples", "sort": "pass_rate", "desc": "1"},
        {"tab": "examples", "sort": "mean_reward"},
        {"tab": "examples", "q": example[8:14]},
    ]
    static_page = (bundle / "runs" / "a" / "index.html").as_uri()
    for query in queries:
        search = "&".join(f"{key}={quote(value, safe='')}" for key, value in query.items())
        served = _ids(page, f"{server.base}/runs/a?{search}")
        exported = _ids(page, f"{static_page}?{search}")
        kind = query["tab"]
        params = {key: value for key, value in query.items() if key != "tab"}
        key = {"rollouts": "rollout_id", "groups": "group_id", "examples": "example_id"}[kind]
        answered = [row[key] for row in api.get(f"/api/runs/a/{kind}", params={"limit": 50, **params}).json()["rows"]]
        assert exported == served == answered, query
        may_be_empty = ({"tab": "rollouts", "reason": "model_error"}, {"tab": "groups", "no_signal": "1"})
        assert served or query in may_be_empty, query


def test_the_static_export_filters_a_training_runs_rollouts_by_step_as_the_server_does(
    page: object, tmp_path: Path
) -> None:
    from benchmax.inspector import export_static

    write_training_run(tmp_path / "runs" / "train")
    served = _Server(tmp_path / "runs")
    try:
        bundle = export_static(tmp_path / "runs", tmp_path / "bundle").parent
        static_page = (bundle / "runs" / "train" / "index.html").as_uri()
        for step in ("0", "1", "2"):
            live = _ids(page, f"{served.base}/runs/train?tab=rollouts&step={step}")
            exported = _ids(page, f"{static_page}?tab=rollouts&step={step}")
            assert live and exported == live, step
            assert all(rollout_id.startswith(f"step{step}/") for rollout_id in live), live
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        served.stop()
