"""Runs of several envs in the inspector's pages, in real headless Chromium (#33.2): the env of each
rollout, the env filter, the run page's suite table (one row per env), the compare page's per-env
rows, an env name that is markup staying text, a 390 px phone, and a run of one env unchanged.

The runs are real evaluations of ``tests/runner/support/suite_env.py`` (examples of two envs, as a
mixture hands them to the runner) against the scripted model server.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import playwright.sync_api as playwright_api
import pytest
from browser_kit import InspectorServer, fits, open_view, table_answers, table_ids

from benchmax.envs import SamplingParams
from benchmax.runner import RunConfig, arun
from benchmax.testing import ScriptedServer

SUPPORT = Path(__file__).parents[1] / "runner" / "support"
sys.path.insert(0, str(SUPPORT))

from runkit import ENV_SPEC, answers_policy, row, write_split  # noqa: E402

SUITE_SPEC = f"{SUPPORT / 'suite_env.py'}:SuiteEnv"
HOSTILE = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
expect = playwright_api.expect


def _suite_rows(*, code_fixed: bool) -> list[dict[str, Any]]:
    """Math: one right (with ``format``), one wrong; code: one right, one failing (fixed in run b)."""
    return [
        {**row("4", "math one"), "env": "math", "format": 1.0},
        {**row("5", "math two", answers=["6"]), "env": "math"},
        {**row("ok", "code one"), "env": "code"},
        {**row("ok", "code two", script=None if code_fixed else [{"status": 400}]), "env": "code"},
    ]


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs ``a`` and ``b`` (math and code; b fixes a code example), ``one`` (a run of one env) and
    ``hostile`` (an env whose name is markup)."""
    root = tmp_path_factory.mktemp("suite")
    datasets = {
        "a": (SUITE_SPEC, _suite_rows(code_fixed=False)),
        "b": (SUITE_SPEC, _suite_rows(code_fixed=True)),
        "one": (ENV_SPEC, [row("4", bonus=0.5), row("5", answers=["6"])]),
        "hostile": (SUITE_SPEC, [{**row("4", "math"), "env": "math"}, {**row("1", "odd"), "env": HOSTILE}]),
    }

    async def evaluate() -> None:
        with ScriptedServer(policy=answers_policy) as model:
            for name, (spec, rows) in datasets.items():
                write_split(root / f"data-{name}", rows)
                await arun(
                    RunConfig(env=spec, data_dir=root / f"data-{name}", base_url=model.base_url, model="scripted",
                              group_size=2, run_dir=root / name, sampling=SamplingParams(seed=3))
                )  # fmt: skip

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API may hold an event loop in this thread
        pool.submit(lambda: asyncio.run(evaluate())).result(timeout=180)
    return root


@pytest.fixture(scope="module")
def server(suite_dir: Path) -> Iterator[InspectorServer]:
    running = InspectorServer(suite_dir)
    yield running
    running.stop()


def _page(browser: Any, width: int) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    opened = context.new_page()
    opened.errors = []
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    yield from _page(browser, 1400)


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    yield from _page(browser, 390)


def _cells(table: Any) -> list[list[str]]:
    """Each body row of a table, as the text of its cells."""
    return [[cell.strip() for cell in row.locator("td").all_inner_texts()] for row in table.locator("tbody tr").all()]


def _heads(table: Any) -> list[str]:
    return [text.strip().rstrip("▲▼ ").lower() for text in table.locator("thead th").all_inner_texts()]


def _column(page: Any, label: str) -> list[str]:
    """The texts of one column of the rollouts table."""
    table = page.locator(".tab-area table.grid")
    index = _heads(table).index(label)
    return [cells[index] for cells in _cells(table)]


def test_the_suite_table_shows_each_envs_figures_and_sorts(page: Any, server: InspectorServer) -> None:
    open_view(page, f"{server.base}/runs/a", "run")
    suite = page.locator(".suite table.grid")
    expect(page.locator(".suite h2")).to_have_text("Per env")
    assert _heads(suite) == ["env", "rollouts", "failed", "pass rate", "exact", "format", "tests_passed"]
    stored = {figures["env"]: figures for figures in httpx.get(f"{server.base}/api/runs/a/overview").json()["suite"]}
    # math: 4 rollouts, the right one also emits format (filled with 0 on the wrong one);
    # code: a failing example, tests_passed over code's rollouts only; a component an env
    # does not emit is blank, never 0
    assert _cells(suite) == [
        ["code", "4", "2", "50.0%", "—", "—", "0.5"],
        ["math", "4", "0", "50.0%", "0.5", "0.5", "—"],
    ]
    assert stored["code"]["components"] == {"tests_passed": 0.5}  # the same figures the page shows
    assert stored["math"]["components"] == {"exact": 0.5, "format": 0.5}

    suite.locator("th", has_text="failed").click()  # most failures first
    page.wait_for_function("() => new URL(location.href).searchParams.get('ssort') === 'failed'")
    assert [cells[0] for cells in _cells(suite)] == ["code", "math"]
    suite.locator("th", has_text="failed").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('sdesc') === '0'")
    assert [cells[0] for cells in _cells(suite)] == ["math", "code"]
    suite.locator("th", has_text="exact").click()  # an env without the component sorts last either way
    page.wait_for_function("() => new URL(location.href).searchParams.get('ssort') === 'c:exact'")
    assert [cells[0] for cells in _cells(suite)] == ["math", "code"]
    page.reload()
    page.wait_for_selector("body[data-ready=run]")
    assert [cells[0] for cells in _cells(page.locator(".suite table.grid"))] == ["math", "code"]
    assert page.locator(".suite th.active").inner_text().lower() == "exact ▼"
    assert not page.errors


def test_the_env_filter_narrows_the_rollouts_combines_and_stays_in_the_url(page: Any, server: InspectorServer) -> None:
    open_view(page, f"{server.base}/runs/a", "run")
    table_answers(page)
    assert sorted(set(_column(page, "env"))) == ["code", "math"] and len(_column(page, "env")) == 8

    page.select_option("select[name=env]", "code")
    table_answers(page, env="code")
    assert _column(page, "env") == ["code"] * 4
    page.select_option("select[name=reason]", "model_error")
    table_answers(page, env="code", reason="model_error")
    assert _column(page, "env") == ["code"] * 2

    page.reload()  # the URL alone brings the filtered view back
    page.wait_for_selector("body[data-ready=run]")
    table_answers(page, env="code", reason="model_error")
    assert page.locator("select[name=env]").input_value() == "code"
    assert _column(page, "env") == ["code"] * 2
    assert page.locator(".suite tr.current-env td").first.inner_text() == "code"

    page.locator(".suite a.env-link", has_text="math").click()  # a suite row filters the table to its env
    table_answers(page, env="math", reason="model_error")
    page.select_option("select[name=reason]", "")
    table_answers(page, env="math", reason="")
    assert _column(page, "env") == ["math"] * 4
    assert page.locator(".suite tr.current-env td").first.inner_text() == "math"
    page.get_by_role("button", name="clear filters").click()
    table_answers(page, env="")
    assert len(_column(page, "env")) == 8
    assert page.locator(".suite tr.current-env").count() == 0

    page.get_by_role("tab", name="Groups").click()  # from another tab, a suite row opens the rollouts
    page.locator(".suite a.env-link", has_text="code").click()
    table_answers(page, tab="rollouts", env="code")
    assert _column(page, "env") == ["code"] * 4
    assert not page.errors


def test_rollout_and_group_pages_name_the_env(page: Any, server: InspectorServer) -> None:
    rows = httpx.get(f"{server.base}/api/runs/a/rollouts", params={"env": "code", "limit": 1}).json()["rows"]
    rollout = rows[0]
    open_view(page, f"{server.base}/runs/a/rollouts/{quote(rollout['rollout_id'], safe='')}", "rollout")
    line = page.locator(".head p.muted")
    assert line.inner_text().startswith("env code · example ")
    open_view(page, f"{server.base}/runs/a/groups/{quote(rollout['group_id'], safe='')}", "group")
    assert page.locator(".head p.muted").inner_text().startswith("env code · example ")
    page.locator(".head a.env-link").click()
    page.wait_for_selector("body[data-ready=run]")
    table_answers(page, env="code")
    assert _column(page, "env") == ["code"] * 4
    assert not page.errors


def test_compare_shows_each_env_a_beside_b(page: Any, server: InspectorServer) -> None:
    open_view(page, f"{server.base}/compare?a=a&b=b", "compare")
    expect(page.locator("h2", has_text="Per env")).to_have_count(1)
    assert page.locator("h2", has_text="Per component").count() == 0  # run-wide means would mix envs
    table = page.locator(".compare-suite table.grid")
    heads = _heads(table)
    assert heads[:6] == ["env", "a rollouts", "b rollouts", "a pass", "b pass", "δ pass"]
    assert heads[6:] == [f"{side} {name}" for name in ("exact", "format", "tests_passed") for side in ("a", "b", "δ")]
    rows = {cells[0].split()[0]: dict(zip(heads, cells, strict=True)) for cells in _cells(table)}
    assert set(rows) == {"code", "math"}
    code, math = rows["code"], rows["math"]
    assert (code["a pass"], code["b pass"], code["δ pass"]) == ("50.0%", "100.0%", "+50.0 pp")
    assert (code["a tests_passed"], code["b tests_passed"], code["δ tests_passed"]) == ("0.5", "1", "+0.5")
    assert (code["a exact"], code["δ exact"], math["b tests_passed"]) == ("—", "—", "—")
    assert (math["a exact"], math["b exact"], math["δ exact"], math["δ pass"]) == ("0.5", "0.5", "0", "0.0 pp")
    page.locator(".compare-suite a.mini", has_text="B").first.click()  # B's rollouts of that env
    page.wait_for_selector("body[data-ready=run]")
    assert "/runs/b?" in page.url and "env=code" in page.url
    assert not page.errors


def test_a_run_of_one_env_looks_as_before(page: Any, server: InspectorServer) -> None:
    open_view(page, f"{server.base}/runs/one", "run")
    table_answers(page)
    assert page.locator(".suite").is_hidden() and page.locator(".suite table").count() == 0
    assert page.locator("select[name=env]").count() == 0
    assert "env" not in _heads(page.locator(".tab-area table.grid"))
    rollout = httpx.get(f"{server.base}/api/runs/one/rollouts", params={"limit": 1}).json()["rows"][0]
    open_view(page, f"{server.base}/runs/one/rollouts/{quote(rollout['rollout_id'], safe='')}", "rollout")
    assert page.locator(".head p.muted").inner_text().startswith("example ")
    open_view(page, f"{server.base}/runs/one/groups/{quote(rollout['group_id'], safe='')}", "group")
    assert page.locator(".head p.muted").inner_text().startswith("example ")
    open_view(page, f"{server.base}/compare?a=one&b=one", "compare")
    expect(page.locator("h2", has_text="Per component")).to_have_count(1)
    assert page.locator("h2", has_text="Per env").count() == 0
    assert not page.errors


def test_an_env_named_with_markup_stays_text(page: Any, server: InspectorServer) -> None:
    rollout = httpx.get(f"{server.base}/api/runs/hostile/rollouts", params={"env": HOSTILE}).json()["rows"][0]
    open_view(page, f"{server.base}/runs/hostile", "run")
    table_answers(page)
    assert HOSTILE in [cells[0] for cells in _cells(page.locator(".suite table.grid"))]
    assert HOSTILE in _column(page, "env")
    assert any(HOSTILE in text for text in page.locator("select[name=env] option").all_inner_texts())
    page.select_option("select[name=env]", HOSTILE)
    table_answers(page, env=HOSTILE)
    assert _column(page, "env") == [HOSTILE] * 2
    for url, view in (
        (f"{server.base}/runs/hostile/rollouts/{quote(rollout['rollout_id'], safe='')}", "rollout"),
        (f"{server.base}/runs/hostile/groups/{quote(rollout['group_id'], safe='')}", "group"),
        (f"{server.base}/compare?a=hostile&b=a", "compare"),
    ):
        open_view(page, url, view)
        assert HOSTILE in page.locator("main").inner_text(), url
    assert page.evaluate("window.__xss") is None
    assert page.locator("main script").count() == 0 and page.locator("img[src=x]").count() == 0
    assert not page.errors


def test_the_suite_table_scrolls_on_a_390_pixel_phone(phone: Any, server: InspectorServer) -> None:
    open_view(phone, f"{server.base}/runs/a", "run")
    table_answers(phone)
    holder = phone.locator(".suite .suite-table")
    expect(holder).to_be_visible()
    scroll, client = holder.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
    assert scroll > client, "the suite table is wider than a phone: its holder scrolls it"
    assert holder.evaluate("(el) => getComputedStyle(el).overflowX") == "auto"
    fits(phone, 390)  # the page itself never scrolls sideways
    open_view(phone, f"{server.base}/compare?a=a&b=b", "compare")
    fits(phone, 390)
    assert not phone.errors


def test_the_static_export_filters_by_env_as_the_server_does(page: Any, server: InspectorServer, suite_dir: Path,
                                                             tmp_path: Path) -> None:  # fmt: skip
    from benchmax.inspector import export_static

    bundle = export_static(suite_dir, tmp_path / "bundle").parent
    open_view(page, (bundle / "runs" / "a" / "index.html").as_uri() + "?env=code", "run")
    expect(page.locator(".tab-area table.grid tbody tr")).to_have_count(4)
    assert _column(page, "env") == ["code"] * 4
    assert [cells[0] for cells in _cells(page.locator(".suite table.grid"))] == ["code", "math"]
    assert not page.errors


def test_screenshot_of_a_run_of_two_envs(page: Any, server: InspectorServer) -> None:
    """docs/inspector-suite.png, when BENCHMAX_INSPECTOR_SCREENSHOTS names docs/."""
    open_view(page, f"{server.base}/runs/a?env=code", "run")
    table_answers(page, env="code")
    page.wait_for_selector("text=latency per rollout")
    expect(page.locator(".suite table.grid tbody tr")).to_have_count(2)
    folder = os.environ.get("BENCHMAX_INSPECTOR_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / "inspector-suite.png"), full_page=True)
    assert not page.errors


# -- the env of each row on the examples and groups tabs, and sorting every table by env ------------


def _sort_by_env(page: Any, **params: str) -> None:
    """Click the table's env header; wait for the table drawn for the URL ``params`` describe."""
    page.locator(".tab-area thead th").filter(has_text=re.compile(r"^env")).click()
    table_answers(page, **params)


@pytest.mark.parametrize("tab", ["examples", "groups", "rollouts"])
def test_every_table_of_a_mixture_shows_each_rows_env_and_sorts_by_it(page: Any, server: InspectorServer,
                                                                       tab: str) -> None:  # fmt: skip
    count = 8 if tab == "rollouts" else 4  # two examples of each env, two rollouts each
    open_view(page, f"{server.base}/runs/a?tab={tab}", "run")
    table_answers(page, tab=tab)
    envs = _column(page, "env")
    assert sorted(envs) == ["code"] * (count // 2) + ["math"] * (count // 2)
    if tab != "rollouts":  # (rollouts are in the order they were written: either env may be first)
        assert envs != sorted(envs), "the table starts in dataset order (math's examples first)"
    heads = _heads(page.locator(".tab-area table.grid"))
    assert heads.index("env") == heads.index("example" if tab != "rollouts" else "rollout") + 1

    _sort_by_env(page, tab=tab, sort="env", desc="0")
    assert _column(page, "env") == ["code"] * (count // 2) + ["math"] * (count // 2)
    assert page.locator(".tab-area th.active").inner_text().strip().lower() == "env ▲"
    _sort_by_env(page, tab=tab, sort="env", desc="1")
    assert _column(page, "env") == ["math"] * (count // 2) + ["code"] * (count // 2)
    page.reload()  # the URL alone brings the sorted table back
    page.wait_for_selector("body[data-ready=run]")
    table_answers(page, tab=tab, sort="env", desc="1")
    assert _column(page, "env") == ["math"] * (count // 2) + ["code"] * (count // 2)

    page.select_option("select[name=env]", "code")  # the env filter, on this tab too
    table_answers(page, tab=tab, sort="env", env="code")
    assert _column(page, "env") == ["code"] * (count // 2)
    assert page.locator(".suite tr.current-env td").first.inner_text() == "code"
    assert not page.errors


def test_the_static_export_sorts_and_filters_every_table_by_env_as_the_server_does(
    page: Any, server: InspectorServer, suite_dir: Path, tmp_path: Path
) -> None:
    from benchmax.inspector import export_static

    bundle = export_static(suite_dir, tmp_path / "bundle").parent
    static_page = (bundle / "runs" / "a" / "index.html").as_uri()
    queries = [
        {"tab": tab, **extra}
        for tab in ("rollouts", "examples", "groups")
        for extra in ({"sort": "env"}, {"sort": "env", "desc": "1"}, {"env": "math"}, {"env": "code", "sort": "env"})
    ]
    key = {"rollouts": "rollout_id", "examples": "example_id", "groups": "group_id"}
    for query in queries:
        search = "&".join(f"{name}={quote(value, safe='')}" for name, value in query.items())
        served = table_ids(page, f"{server.base}/runs/a?{search}")
        exported = table_ids(page, f"{static_page}?{search}")
        params = {name: value for name, value in query.items() if name != "tab"}
        rows = httpx.get(f"{server.base}/api/runs/a/{query['tab']}", params=params).json()["rows"]
        assert exported == served == [row[key[query["tab"]]] for row in rows], query
        envs = [row["env"] for row in rows]
        assert envs == sorted(envs, reverse=query.get("desc") == "1"), query
        assert set(envs) == ({query["env"]} if "env" in query else {"code", "math"}), query
    assert not page.errors


@pytest.mark.parametrize("tab", ["examples", "groups"])
def test_an_env_named_with_markup_stays_text_on_the_examples_and_groups_tabs(page: Any, server: InspectorServer,
                                                                             tab: str) -> None:  # fmt: skip
    open_view(page, f"{server.base}/runs/hostile?tab={tab}", "run")
    table_answers(page, tab=tab)
    assert sorted(_column(page, "env")) == sorted([HOSTILE, "math"])
    _sort_by_env(page, tab=tab, sort="env", desc="0")
    assert _column(page, "env") == [HOSTILE, "math"]  # "<" sorts before "m"
    page.select_option("select[name=env]", HOSTILE)
    table_answers(page, tab=tab, sort="env", env=HOSTILE)
    assert _column(page, "env") == [HOSTILE]
    assert page.evaluate("window.__xss") is None
    assert page.locator("main script").count() == 0 and page.locator("img[src=x]").count() == 0
    assert not page.errors


@pytest.mark.parametrize("tab", ["examples", "groups"])
def test_a_run_of_one_env_has_no_env_column_or_filter_on_the_examples_and_groups_tabs(
    page: Any, server: InspectorServer, tab: str
) -> None:
    open_view(page, f"{server.base}/runs/one?tab={tab}", "run")
    table_answers(page, tab=tab)
    heads = _heads(page.locator(".tab-area table.grid"))
    assert "prompt" in heads and "env" not in heads
    assert page.locator("select[name=env]").count() == 0
    assert page.locator(".tab-area table.grid tbody tr").count() == 2
    assert not page.errors
