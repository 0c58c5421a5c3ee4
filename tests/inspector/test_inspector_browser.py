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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import playwright.sync_api as playwright_api
import pytest
import uvicorn
from inspector_runs import MIXTURE_ENVS, write_synthetic_groups, write_training_run

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


_TABLE_ANSWERS = """(want) => {
  const url = new URL(location.href);
  if (!Object.entries(want).every(([key, value]) => (url.searchParams.get(key) || '') === value)) return false;
  const area = document.querySelector('.tab-area');
  return !!area && area.dataset.drawn === location.search && area.getAttribute('aria-busy') === 'false';
}"""


def _table_answers(page: object, **params: str) -> None:
    """Wait until the URL carries ``params`` and the run page's table is the one drawn for that URL.

    A filter or a sort changes the URL at once and redraws the table when its answer arrives:
    the old table stays on screen meanwhile, and may even have the row count the test expects.
    """
    page.wait_for_function(_TABLE_ANSWERS, arg=params, timeout=15000)  # type: ignore[attr-defined]


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
    _table_answers(page)
    rows = page.locator(".tab-area table.grid tbody tr")
    assert rows.count() == 15
    page.screenshot(path=str(shots / "inspector-run.png"), full_page=True)

    page.select_option("select[name=reason]", "model_error")
    _table_answers(page, reason="model_error")
    assert rows.count() == 3
    page.select_option("select[name=reason]", "")
    _table_answers(page, reason="")
    assert rows.count() == 15
    page.fill("input[name=q]", "window.__xss")
    _table_answers(page, q="window.__xss")
    assert rows.count() == 3
    page.fill("input[name=q]", "")
    _table_answers(page, q="")
    assert rows.count() == 15

    page.locator("th", has_text="reward").first.click()
    _table_answers(page, sort="reward", desc="1")
    rewards = [
        float(text) for text in page.locator(".tab-area table.grid tbody tr td:nth-child(5)").all_text_contents()
    ]
    assert rewards == sorted(rewards, reverse=True)
    assert len(rewards) == 15

    page.locator("a", has_text="group · 0").first.click()
    page.wait_for_selector("body[data-ready=group]")
    assert page.locator("article.sibling").count() == 3
    assert "advantage" in page.locator("article.sibling").first.inner_text().lower()
    assert not page.errors


def test_run_page_shows_the_runs_provenance(page: object, server: _Server, runs_dir: Path) -> None:
    from benchmax.store import Run

    with Run(runs_dir / "a") as run:
        provenance = run.meta["provenance"]
    _open(page, server.base + "/runs/a", "run")
    panel = page.locator("details.provenance")
    expect(panel).to_have_count(1)
    assert f"code {provenance['code']['sha256'][:12]}" in panel.locator("summary").inner_text()
    panel.locator("summary").click()
    terms = panel.locator("dt").all_text_contents()
    values = dict(zip(terms, panel.locator("dd").all_text_contents(), strict=True))
    assert terms[:6] == ["env", "code", "data", "model", "sampling", "benchmax"]
    assert values["env"] == provenance["env"]["path"]
    assert values["model"] == f"scripted at {provenance['endpoint']}"
    assert values["benchmax"].startswith(provenance["benchmax"])
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
    page.evaluate("window.scrollTo(0, 0)")  # the traceback click scrolled: sticky headers would land mid-shot
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
        _table_answers(page)
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


def test_a_traced_rollout_shows_its_trace_id_copyable_and_an_untraced_one_nothing(page: object, tmp_path: Path) -> None:
    writer = RunWriter.create(tmp_path / "traced", {"status": "completed", "model": "m"})
    write_synthetic_groups(writer, 0, 1, traced=True)
    writer.close()
    served = _Server(tmp_path)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served.base)  # type: ignore[attr-defined]
    try:
        _open(page, f"{served.base}/runs/traced/rollouts/{quote('eval/live0000#0', safe='')}", "rollout")
        line = page.locator(".head .trace")
        expect(line).to_have_text(re.compile(r"^trace 0{15}10{15}1\s+copy$"))
        line.locator("button", has_text="copy").click()
        expect(line.locator("button")).to_have_text("copied ✓")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == f"{1:016x}{1:016x}"
        _open(page, f"{served.base}/runs/traced/rollouts/{quote('eval/live0000#1', safe='')}", "rollout")
        expect(page.locator(".head h1")).to_contain_text("finished")
        assert page.locator(".head .trace").count() == 0
        assert "trace" not in page.locator(".head").inner_text()
        assert not page.errors
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


def test_a_mixture_training_run_shows_each_envs_reward_curve_and_dead_groups(page: object, tmp_path: Path) -> None:
    write_training_run(tmp_path / "train", mixture=True)
    served = _Server(tmp_path)
    try:
        _open(page, f"{served.base}/runs/train", "run")
        rows = page.locator("table.grid tbody tr")
        expect(rows).to_have_count(3)
        math, code = MIXTURE_ENVS
        for env in MIXTURE_ENVS:
            for title in (f"reward · {env}", f"dead groups · {env}"):
                chart = page.locator("figure.chart", has=page.get_by_text(title, exact=True))
                expect(chart).to_have_count(1)
                expect(chart.locator("circle")).to_have_count(3)  # one point per step
        headers = page.locator("table.grid thead th").all_text_contents()
        assert {f"{math} reward", f"{math} dead", f"{code} reward", f"{code} dead"} <= set(headers)
        cells = rows.nth(1).locator("td").all_text_contents()
        column = {name: index for index, name in enumerate(headers)}
        assert cells[column[f"{math} reward"]] == "0.25"
        assert cells[column[f"{math} dead"]] == "0 / 1"
        assert cells[column[f"{code} dead"]] == "2 / 2"  # step 1: both of its groups had no signal
        assert page.locator("table.grid b, figure.chart b").count() == 0  # an env name is text, never markup
        assert not page.errors
    finally:
        served.stop()


def _ids(page: object, url: str, view: str = "run") -> list[str]:
    _open(page, url, view)
    _table_answers(page)
    # the link's title is the full id (the text shows the short one)
    links = page.locator("table.grid tbody a.id")  # type: ignore[attr-defined]
    return [links.nth(index).get_attribute("title") for index in range(links.count())]


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


QUIZ_ENV = """
from benchmax.envs import BaseEnv, JsonlDataset


class QuizEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / "eval.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        return {"correct": WEIGHT * float(rollout.messages[-1].get("content") == "paris")}
"""


def test_compare_warns_when_the_runs_differ_in_env_code(page: object, tmp_path: Path) -> None:
    import benchmax
    from benchmax.testing import ScriptedServer

    env_dir, root = tmp_path / "env", tmp_path / "runs"
    env_dir.mkdir()
    (env_dir / "eval.jsonl").write_text('{"prompt_messages": [{"role": "user", "content": "capital of France?"}]}\n')

    def evaluate_twice() -> None:  # in its own thread: Playwright's sync API holds this one's event loop
        with ScriptedServer(policy=lambda body: {"content": "paris"}) as model:
            for name, weight in (("before", 1.0), ("after", 2.0)):
                (env_dir / "env.py").write_text(f"WEIGHT = {weight}\n" + QUIZ_ENV)
                benchmax.evaluate(str(env_dir / "env.py"), base_url=model.base_url, model="scripted",
                                  run_dir=root / name)  # fmt: skip

    with ThreadPoolExecutor(1) as pool:
        pool.submit(evaluate_twice).result(timeout=120)
    inspector = _Server(root)
    try:
        _open(page, f"{inspector.base}/compare?a=before&b=after", "compare")
        note = page.locator(".provenance-warning")
        expect(note).to_have_count(1)
        assert "differ in env code or data" in note.inner_text()
        assert "env code differs" in note.locator("li").first.inner_text()
        _open(page, f"{inspector.base}/compare?a=before&b=before", "compare")
        expect(page.locator(".provenance-warning")).to_have_count(0)
    finally:
        inspector.stop()
    assert not page.errors


# -- the task beside the answer, tool outcomes, images, comparing, the runs list -------------------


@pytest.fixture(scope="module")
def vision_server(vision_dir: Path) -> Iterator[_Server]:
    running = _Server(vision_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def mixed_server(mixed_dir: Path) -> Iterator[_Server]:
    running = _Server(mixed_dir)
    yield running
    running.stop()


def _vision_rollout(vision_dir: Path, text: str) -> str:
    from benchmax.store import RunQueries

    with RunQueries(vision_dir / "vision") as run:
        rows = run.rollouts(limit=50).rows
    return next(row["rollout_id"] for row in rows if text in row["prompt"])


def _fits(page: object, width: int) -> None:
    """Nothing on the page is wider than the viewport (no sideways scrolling)."""
    wide = page.evaluate("() => document.documentElement.scrollWidth")  # type: ignore[attr-defined]
    assert wide <= width, f"the page is {wide}px wide in a {width}px viewport"


def test_a_rollout_shows_its_task_images_and_which_tool_calls_failed(
    page: object, vision_server: _Server, vision_dir: Path, shots: Path
) -> None:
    rollout = _vision_rollout(vision_dir, "What colour is it?")
    _open(page, f"{vision_server.base}/runs/vision/rollouts/{quote(rollout, safe='')}", "rollout")

    fields = page.locator(".example-card table.fields")
    assert fields.locator("th").all_text_contents() == ["answer", "level"]
    assert fields.locator("td").first.inner_text().strip() == "blue"
    assert '"tags": [' in fields.locator("td").nth(1).inner_text()

    prompt_image = page.locator(".transcript .prompt img.content-image")
    expect(prompt_image).to_have_count(1)
    assert prompt_image.get_attribute("src").startswith("data:image/png;base64,")
    page.wait_for_function("() => [...document.querySelectorAll('img.content-image')].every((i) => i.complete)")
    assert prompt_image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]") == [64, 48]
    assert "base64" not in page.locator("main").inner_text()

    tools = page.locator(".msg[data-role=tool]")
    assert tools.count() == 3
    by_name = {tools.nth(i).locator(".tool-name").inner_text(): tools.nth(i) for i in range(3)}
    zoom, lookup, nope = by_name["zoom"], by_name["lookup"], by_name["nope"]
    assert zoom.locator("img.content-image").count() == 1 and "zoomed in" in zoom.inner_text()
    assert '\n  "city": "Paris",\n' in lookup.locator("pre").first.inner_text()
    assert "line one\\nline two" in lookup.inner_text()
    assert (
        "tool-error" in (nope.get_attribute("class") or "")
        and nope.locator(".badge", has_text="tool error").count() == 1
    )
    for success in (zoom, lookup):
        assert "tool-error" not in (success.get_attribute("class") or "")
        assert success.locator(".badge", has_text="result").count() == 1
    colours = [tool.evaluate("(el) => getComputedStyle(el).backgroundColor") for tool in (zoom, nope)]
    assert colours[0] != colours[1], "a tool error is painted differently from a result"
    assert "advantage" in page.locator("section.card h3", has_text="reward").inner_text()
    page.screenshot(path=str(shots / "inspector-rollout-vision.png"), full_page=True)
    assert not page.errors


def test_hostile_and_remote_image_urls_are_never_loaded_or_linked_as_code(
    page: object, vision_server: _Server, vision_dir: Path
) -> None:
    from inspector_runs import REMOTE

    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))  # type: ignore[attr-defined]
    hostile = _vision_rollout(vision_dir, "and remote images")
    _open(page, f"{vision_server.base}/runs/vision/rollouts/{quote(hostile, safe='')}", "rollout")
    assert page.locator("main img").count() == 0
    link = page.locator("a.remote-image")
    assert link.count() == 1 and link.get_attribute("href") == REMOTE
    assert "noopener" in link.get_attribute("rel")
    assert page.locator("a[href^='javascript:'], a[href^='data:']").count() == 0
    notes = page.locator(".image-part.elided").all_text_contents()
    assert any("unsupported URL: javascript:" in note for note in notes)
    assert any("not a base64 PNG" in note for note in notes)
    assert page.locator("#injected, #injected-field").count() == 0
    assert "onerror" in page.locator(".example-card table.fields").inner_text()
    huge = _vision_rollout(vision_dir, "a huge image")
    _open(page, f"{vision_server.base}/runs/vision/rollouts/{quote(huge, safe='')}", "rollout")
    assert page.locator("main img").count() == 0
    assert "over the 2.0 MB bound" in page.locator(".image-part.elided").first.inner_text()
    assert page.evaluate("window.__xss") is None and page.dialogs == [] and not page.errors
    assert not [url for url in requested if "images.example.invalid" in url]


def test_every_list_of_examples_shows_a_prompt_excerpt(page: object, server: _Server) -> None:
    for tab in ("rollouts", "examples", "groups"):
        _open(page, f"{server.base}/runs/a?tab={tab}", "run")
        _table_answers(page, tab=tab)
        headers = page.locator(".tab-area table.grid th").all_text_contents()
        at = [header.strip() for header in headers].index("prompt") + 1
        cells = page.locator(f".tab-area table.grid tbody td:nth-child({at})").all_text_contents()
        assert any(cell.startswith("add 1 and 2") for cell in cells), (tab, cells)
    page.locator(".tab-area table.grid tbody td:first-child a.id").first.click()
    page.wait_for_selector("body[data-ready=group]")
    card = page.locator("section.example-card")
    expect(card).to_be_visible()
    assert card.locator(".msg[data-role=user]").first.is_visible()
    assert not page.errors


def test_compare_names_a_and_b_swaps_them_and_refuses_deltas_without_common_examples(
    page: object, mixed_server: _Server, shots: Path
) -> None:
    _open(page, mixed_server.base + "/", "runs")
    page.get_by_label("select b", exact=True).check()
    page.get_by_label("select a", exact=True).check()
    assert page.locator(".pick-line [data-side=a]").inner_text() == "a", "the older run is the baseline"
    page.get_by_role("button", name="swap A and B").click()
    assert page.locator(".pick-line [data-side=a]").inner_text() == "b"
    page.get_by_role("button", name="Compare selected").click()
    page.wait_for_selector("body[data-ready=compare]")
    assert "a=b&b=a" in page.url
    assert page.locator(".ab-line [data-side=a]").inner_text() == "b"
    page.locator("a.button", has_text="swap A and B").click()
    page.wait_for_selector("body[data-ready=compare]")
    expect(page.locator(".ab-line [data-side=a]")).to_have_text("a")
    assert "a=a&b=b" in page.url
    headers = [text.strip() for text in page.locator("table.grid").nth(1).locator("th").all_text_contents()]
    assert "prompt" in headers

    _open(page, f"{mixed_server.base}/compare?a=a&b=vision", "compare")
    verdict = page.locator(".not-comparable")
    expect(verdict).to_contain_text("0 common examples: not comparable")
    assert page.locator(".warn-box", has_text="different envs").count() == 1
    assert "pp" not in page.locator("main").inner_text(), "no pass-rate delta is shown"
    assert page.locator("table.grid").count() == 0
    page.screenshot(path=str(shots / "inspector-compare-unrelated.png"), full_page=True)
    assert not page.errors


def test_the_runs_list_sorts_marks_rescores_and_fits_1400_pixels(page: object, mixed_server: _Server) -> None:
    _open(page, mixed_server.base + "/", "runs")
    ids = lambda: page.locator("a.run-link").all_text_contents()  # noqa: E731
    page.locator("th", has_text="rollouts").click()
    expect(page).to_have_url(re.compile("sort=rollouts&desc=1"))
    assert ids()[-1] == "vision"
    page.locator("th", has_text="rollouts").click()
    expect(page).to_have_url(re.compile("sort=rollouts&desc=0"))
    assert ids()[0] == "vision"
    page.locator("th", has_text="run").first.click()
    expect(page).to_have_url(re.compile("sort=run&desc=0"))
    assert ids() == ["a", "a-rescored", "b", "vision"]

    row = {
        name: page.locator("tbody tr", has=page.locator("a.run-link", has_text=re.compile(f"^{name}$")))
        for name in ids()
    }
    assert row["a-rescored"].locator(".rescore-note").inner_text().strip() == "rescore of a"
    assert row["a-rescored"].locator(".rescore-note a").get_attribute("href").endswith("/runs/a")
    assert row["a"].locator(".rescore-note").count() == 0
    created = {name: row[name].locator("td").nth(4).inner_text() for name in ("a", "a-rescored")}
    assert created["a"] != created["a-rescored"], "a rescore has its own creation date"
    components = {name: row[name].locator(".component .name").all_text_contents() for name in ids()}
    assert components["vision"] == ["correct"] and components["a"] == ["correct", "format"]
    _fits(page, 1400)
    clipped = page.evaluate(
        "() => [...document.querySelectorAll('table.grid td, table.grid th')]"
        ".filter((cell) => cell.scrollWidth > cell.clientWidth + 1).map((cell) => cell.textContent)"
    )
    assert clipped == [], "no cell's content is cut off"
    assert not page.errors


def test_rollout_pages_fit_a_390_pixel_phone(
    browser: object, vision_server: _Server, vision_dir: Path, server: _Server, runs_dir: Path, shots: Path
) -> None:
    from benchmax.store import RunQueries

    with RunQueries(runs_dir / "a") as run:
        longest = run.rollouts(sort="num_tool_calls", descending=True, limit=1).rows[0]["rollout_id"]
    context = browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[attr-defined]
    try:
        phone = context.new_page()
        rollout = _vision_rollout(vision_dir, "What colour is it?")
        _open(phone, f"{vision_server.base}/runs/vision/rollouts/{quote(rollout, safe='')}", "rollout")
        phone.wait_for_function("() => [...document.querySelectorAll('img.content-image')].every((i) => i.complete)")
        _fits(phone, 390)
        phone.screenshot(path=str(shots / "inspector-rollout-390.png"), full_page=True)
        _open(phone, f"{server.base}/runs/a/rollouts/{quote(longest, safe='')}", "rollout")
        _fits(phone, 390)
    finally:
        context.close()


def test_a_few_distinct_values_draw_one_labelled_bar_each_with_heights_by_count(page: object, server: _Server) -> None:
    stored = httpx.get(f"{server.base}/api/runs/a/overview").json()["components"]["format"]["histogram"]
    assert 1 < len(stored) <= 20 and all(bar["low"] == bar["high"] for bar in stored)

    _open(page, server.base + "/runs/a", "run")
    chart = page.locator("figure.chart", has=page.locator("figcaption", has_text=re.compile("^format")))
    bars = chart.locator("rect.bar")
    expect(bars).to_have_count(len(stored))
    values = chart.locator("text.axis.value").all_text_contents()
    counts = [int(bars.nth(i).get_attribute("data-count")) for i in range(bars.count())]
    heights = [float(bars.nth(i).get_attribute("height")) for i in range(bars.count())]
    assert counts == [bar["count"] for bar in stored]
    assert [float(value) for value in values] == [bar["low"] for bar in stored]
    assert chart.locator("text.axis.count").all_text_contents() == [str(count) for count in counts]
    tallest = max(counts)
    for count, height in zip(counts, heights, strict=True):
        assert height == pytest.approx(max(1.5, 84 * count / tallest) if count else 0)
    assert not page.errors


def test_the_static_export_draws_inline_images_too(page: object, vision_dir: Path, tmp_path: Path) -> None:
    from benchmax.inspector import export_static
    from benchmax.inspector.export import file_name

    bundle = export_static(vision_dir, tmp_path / "bundle").parent
    rollout = _vision_rollout(vision_dir, "What colour is it?")
    _open(page, (bundle / "runs" / "vision" / "rollouts" / f"{file_name(rollout)}.html").as_uri(), "rollout")
    shown = page.locator("main img.content-image")
    expect(shown).to_have_count(2)  # the prompt's image and the zoom tool's
    page.wait_for_function("() => [...document.querySelectorAll('img.content-image')].every((i) => i.complete)")
    assert shown.first.evaluate("(img) => [img.naturalWidth, img.naturalHeight]") == [64, 48]
    assert "base64" not in page.locator("main").inner_text()
    assert page.evaluate("window.__xss") is None and not page.errors


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
