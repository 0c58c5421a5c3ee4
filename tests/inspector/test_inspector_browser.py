"""The inspector driven in real headless Chromium (Debian's ``chromium``, through Playwright).

Screenshots of the main pages land in ``$BENCHMAX_INSPECTOR_SCREENSHOTS`` when set
(``docs/`` keeps the ones the README shows), else in a temporary folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import playwright.sync_api as playwright_api
import pytest
from browser_kit import InspectorServer, fits, open_view, table_answers, table_ids
from inspector_runs import MIXTURE_ENVS, write_synthetic_groups, write_training_run

from benchmax.store import RunWriter

expect = playwright_api.expect


@pytest.fixture(scope="module")
def server(runs_dir: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(runs_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("BENCHMAX_INSPECTOR_SCREENSHOTS")
    folder = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_runs_list_compares_two_runs(page: object, server: InspectorServer, shots: Path) -> None:
    open_view(page, server.base + "/", "runs")
    assert sorted(page.locator("a.run-link").all_text_contents()) == ["a", "b"]
    page.screenshot(path=str(shots / "inspector-runs.png"))
    page.get_by_label("select a").check()
    page.get_by_label("select b").check()
    page.get_by_role("button", name="Compare selected").click()
    page.wait_for_selector("body[data-ready=compare]")
    assert "+0.2" in page.locator("table.grid").first.inner_text()
    page.screenshot(path=str(shots / "inspector-compare.png"), full_page=True)
    assert not page.errors


def test_run_page_filters_sorts_and_opens_a_group(page: object, server: InspectorServer, shots: Path) -> None:
    open_view(page, server.base + "/runs/a", "run")
    page.wait_for_selector("text=latency per rollout")
    table_answers(page)
    rows = page.locator(".tab-area table.grid tbody tr")
    assert rows.count() == 15
    page.screenshot(path=str(shots / "inspector-run.png"), full_page=True)

    page.select_option("select[name=reason]", "model_error")
    table_answers(page, reason="model_error")
    assert rows.count() == 3
    page.select_option("select[name=reason]", "")
    table_answers(page, reason="")
    assert rows.count() == 15
    page.fill("input[name=q]", "window.__xss")
    table_answers(page, q="window.__xss")
    assert rows.count() == 3
    page.fill("input[name=q]", "")
    table_answers(page, q="")
    assert rows.count() == 15

    page.locator("th", has_text="reward").first.click()
    table_answers(page, sort="reward", desc="1")
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


def test_run_page_shows_the_runs_provenance(page: object, server: InspectorServer, runs_dir: Path) -> None:
    from benchmax.store import Run

    with Run(runs_dir / "a") as run:
        provenance = run.meta["provenance"]
    open_view(page, server.base + "/runs/a", "run")
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
    page: object, server: InspectorServer, runs_dir: Path, shots: Path
) -> None:
    from benchmax.store import RunQueries

    with RunQueries(runs_dir / "a") as run:
        row = run.rollouts(sort="num_tool_calls", descending=True, limit=1).rows[0]
    open_view(page, f"{server.base}/runs/a/groups/{quote(row['group_id'], safe='')}", "group")
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


def test_a_script_payload_in_a_model_reply_stays_inert_text(
    page: object, server: InspectorServer, runs_dir: Path
) -> None:
    from benchmax.store import RolloutFilter, RunQueries

    with RunQueries(runs_dir / "a") as run:
        row = run.rollouts(RolloutFilter(text="window.__xss"), limit=1).rows[0]
    for url, view in (
        (f"{server.base}/runs/a?q=window.__xss", "run"),
        (f"{server.base}/runs/a/groups/{quote(row['group_id'], safe='')}", "group"),
        (f"{server.base}/runs/a/rollouts/{quote(row['rollout_id'], safe='')}", "rollout"),
    ):
        open_view(page, url, view)
        page.wait_for_timeout(300)
        assert page.evaluate("window.__xss") is None, url
        assert page.locator("#injected").count() == 0, url
        assert page.locator("img[src=x]").count() == 0, url
        assert page.locator("main script").count() == 0, url
        assert "onerror" in page.locator("main").inner_text(), url
    assert page.dialogs == [] and not page.errors


def test_new_rollouts_appear_while_the_run_is_being_written(page: object, tmp_path: Path) -> None:
    writer = RunWriter.create(tmp_path / "live", {"status": "running", "model": "m", "pass_threshold": 1.0})
    live = InspectorServer(tmp_path)
    try:
        write_synthetic_groups(writer, 0, 3)
        open_view(page, live.base + "/runs/live", "run")
        table_answers(page)
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
    open_view(page, index.as_uri(), "runs")
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
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/tokens/rollouts/{quote('eval/live0000#0', safe='')}", "rollout")
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
    served = InspectorServer(tmp_path)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served.base)  # type: ignore[attr-defined]
    try:
        open_view(page, f"{served.base}/runs/traced/rollouts/{quote('eval/live0000#0', safe='')}", "rollout")
        line = page.locator(".head .trace")
        expect(line).to_have_text(re.compile(r"^trace 0{15}10{15}1\s+copy$"))
        line.locator("button", has_text="copy").click()
        expect(line.locator("button")).to_have_text("copied ✓")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == f"{1:016x}{1:016x}"
        open_view(page, f"{served.base}/runs/traced/rollouts/{quote('eval/live0000#1', safe='')}", "rollout")
        expect(page.locator(".head h1")).to_contain_text("finished")
        assert page.locator(".head .trace").count() == 0
        assert "trace" not in page.locator(".head").inner_text()
        assert not page.errors
    finally:
        served.stop()


def test_a_training_run_opens_on_its_steps_and_a_step_links_to_its_rollouts(page: object, tmp_path: Path) -> None:
    write_training_run(tmp_path / "train")
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/train", "run")
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
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/train", "run")
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


@pytest.mark.parametrize("mixture", [False, True])
def test_a_curriculum_runs_set_aside_count_and_level_are_charted_and_tabled_per_step(
    page: object, tmp_path: Path, mixture: bool
) -> None:
    write_training_run(tmp_path / "train", mixture=mixture, curriculum=True)
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/train", "run")
        rows = page.locator("table.grid tbody tr")
        expect(rows).to_have_count(3)
        labels = ["set aside", "level"]
        if mixture:
            labels += [f"{figure} · {env}" for env in MIXTURE_ENVS for figure in ("set aside", "level")]
        for label in labels:
            chart = page.locator("figure.chart", has=page.get_by_text(f"curriculum: {label}", exact=True))
            expect(chart).to_have_count(1)
            expect(chart.locator("circle")).to_have_count(3)  # one point per step
        headers = page.locator("table.grid thead th").all_text_contents()
        column = {name: index for index, name in enumerate(headers)}
        assert set(labels) <= set(column), headers
        assert "skipped" not in column  # what the table shows: set aside, level, weight
        cells = rows.nth(2).locator("td").all_text_contents()
        assert cells[column["set aside"]] == "4"
        assert cells[column["level"]] == "1"
        if mixture:
            assert cells[column[f"set aside · {MIXTURE_ENVS[1]}"]] == "3"
            assert cells[column[f"level · {MIXTURE_ENVS[1]}"]] == "2"
            assert page.locator("table.grid b, figure.chart b").count() == 0  # an env name is text, never markup
        assert not page.errors
    finally:
        served.stop()


def test_the_static_export_answers_every_table_query_as_the_server_does(
    page: object, server: InspectorServer, runs_dir: Path, tmp_path: Path
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
        served = table_ids(page, f"{server.base}/runs/a?{search}")
        exported = table_ids(page, f"{static_page}?{search}")
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
    inspector = InspectorServer(root)
    try:
        open_view(page, f"{inspector.base}/compare?a=before&b=after", "compare")
        note = page.locator(".provenance-warning")
        expect(note).to_have_count(1)
        assert "differ in env code or data" in note.inner_text()
        assert "env code differs" in note.locator("li").first.inner_text()
        open_view(page, f"{inspector.base}/compare?a=before&b=before", "compare")
        expect(page.locator(".provenance-warning")).to_have_count(0)
    finally:
        inspector.stop()
    assert not page.errors


# -- the task beside the answer, tool outcomes, images, comparing, the runs list -------------------


@pytest.fixture(scope="module")
def vision_server(vision_dir: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(vision_dir)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def mixed_server(mixed_dir: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(mixed_dir)
    yield running
    running.stop()


def _vision_rollout(vision_dir: Path, text: str) -> str:
    from benchmax.store import RunQueries

    with RunQueries(vision_dir / "vision") as run:
        rows = run.rollouts(limit=50).rows
    return next(row["rollout_id"] for row in rows if text in row["prompt"])


def test_a_rollout_shows_its_task_images_and_which_tool_calls_failed(
    page: object, vision_server: InspectorServer, vision_dir: Path, shots: Path
) -> None:
    rollout = _vision_rollout(vision_dir, "What colour is it?")
    open_view(page, f"{vision_server.base}/runs/vision/rollouts/{quote(rollout, safe='')}", "rollout")

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
    page: object, vision_server: InspectorServer, vision_dir: Path
) -> None:
    from inspector_runs import REMOTE

    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))  # type: ignore[attr-defined]
    hostile = _vision_rollout(vision_dir, "and remote images")
    open_view(page, f"{vision_server.base}/runs/vision/rollouts/{quote(hostile, safe='')}", "rollout")
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
    open_view(page, f"{vision_server.base}/runs/vision/rollouts/{quote(huge, safe='')}", "rollout")
    assert page.locator("main img").count() == 0
    assert "over the 2.0 MB bound" in page.locator(".image-part.elided").first.inner_text()
    assert page.evaluate("window.__xss") is None and page.dialogs == [] and not page.errors
    assert not [url for url in requested if "images.example.invalid" in url]


def test_every_list_of_examples_shows_a_prompt_excerpt(page: object, server: InspectorServer) -> None:
    for tab in ("rollouts", "examples", "groups"):
        open_view(page, f"{server.base}/runs/a?tab={tab}", "run")
        table_answers(page, tab=tab)
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
    page: object, mixed_server: InspectorServer, shots: Path
) -> None:
    open_view(page, mixed_server.base + "/", "runs")
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

    open_view(page, f"{mixed_server.base}/compare?a=a&b=vision", "compare")
    verdict = page.locator(".not-comparable")
    expect(verdict).to_contain_text("0 common examples: not comparable")
    assert page.locator(".warn-box", has_text="different envs").count() == 1
    assert "pp" not in page.locator("main").inner_text(), "no pass-rate delta is shown"
    assert page.locator("table.grid").count() == 0
    page.screenshot(path=str(shots / "inspector-compare-unrelated.png"), full_page=True)
    assert not page.errors


def test_the_runs_list_sorts_marks_rescores_and_fits_1400_pixels(page: object, mixed_server: InspectorServer) -> None:
    open_view(page, mixed_server.base + "/", "runs")
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
    fits(page, 1400)
    clipped = page.evaluate(
        "() => [...document.querySelectorAll('table.grid td, table.grid th')]"
        ".filter((cell) => cell.scrollWidth > cell.clientWidth + 1).map((cell) => cell.textContent)"
    )
    assert clipped == [], "no cell's content is cut off"
    assert not page.errors


def test_rollout_pages_fit_a_390_pixel_phone(
    browser: object,
    vision_server: InspectorServer,
    vision_dir: Path,
    server: InspectorServer,
    runs_dir: Path,
    shots: Path,
) -> None:
    from benchmax.store import RunQueries

    with RunQueries(runs_dir / "a") as run:
        longest = run.rollouts(sort="num_tool_calls", descending=True, limit=1).rows[0]["rollout_id"]
    context = browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[attr-defined]
    try:
        phone = context.new_page()
        rollout = _vision_rollout(vision_dir, "What colour is it?")
        open_view(phone, f"{vision_server.base}/runs/vision/rollouts/{quote(rollout, safe='')}", "rollout")
        phone.wait_for_function("() => [...document.querySelectorAll('img.content-image')].every((i) => i.complete)")
        fits(phone, 390)
        phone.screenshot(path=str(shots / "inspector-rollout-390.png"), full_page=True)
        open_view(phone, f"{server.base}/runs/a/rollouts/{quote(longest, safe='')}", "rollout")
        fits(phone, 390)
    finally:
        context.close()


def test_a_few_distinct_values_draw_one_labelled_bar_each_with_heights_by_count(
    page: object, server: InspectorServer
) -> None:
    stored = httpx.get(f"{server.base}/api/runs/a/overview").json()["components"]["format"]["histogram"]
    assert 1 < len(stored) <= 20 and all(bar["low"] == bar["high"] for bar in stored)

    open_view(page, server.base + "/runs/a", "run")
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
    open_view(page, (bundle / "runs" / "vision" / "rollouts" / f"{file_name(rollout)}.html").as_uri(), "rollout")
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
    served = InspectorServer(tmp_path / "runs")
    try:
        bundle = export_static(tmp_path / "runs", tmp_path / "bundle").parent
        static_page = (bundle / "runs" / "train" / "index.html").as_uri()
        for step in ("0", "1", "2"):
            live = table_ids(page, f"{served.base}/runs/train?tab=rollouts&step={step}")
            exported = table_ids(page, f"{static_page}?tab=rollouts&step={step}")
            assert live and exported == live, step
            assert all(rollout_id.startswith(f"step{step}/") for rollout_id in live), live
        assert not page.errors  # type: ignore[attr-defined]
    finally:
        served.stop()
