"""Fixtures for the inspector tests: real runs, evaluated once per session, and the real
headless Chromium the browser tests drive (``browser_kit`` holds what they share)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from browser_kit import CHROMIUM, CHROMIUM_ARGS
from inspector_runs import make_runs, make_vision_run

T = TypeVar("T")


def _aside(build: Callable[[], T]) -> T:
    """Build in a thread of its own: a fixture may first be needed while Playwright's sync API
    runs an event loop in this thread, where ``asyncio.run`` (inside ``evaluate``) is refused."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(build).result()


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with two finished runs, ``a`` and ``b``."""
    root = tmp_path_factory.mktemp("runs")
    return _aside(lambda: make_runs(root))


@pytest.fixture(scope="session")
def vision_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with one run, ``vision``: images in prompts and tool results, a tool error."""
    root = tmp_path_factory.mktemp("vision")
    _aside(lambda: make_vision_run(root))
    return root


@pytest.fixture(scope="session")
def mixed_dir(runs_dir: Path, vision_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs ``a`` and ``b``, the unrelated ``vision`` run, and ``a-rescored`` (a rescore of ``a``)."""
    import asyncio
    import shutil

    import inspector_runs

    from benchmax.runner import arescore

    root = tmp_path_factory.mktemp("mixed")
    for source in (runs_dir / "a", runs_dir / "b", vision_dir / "vision"):
        shutil.copytree(source, root / source.name)
    spec = f"{inspector_runs.__file__}:InspectEnv"
    _aside(lambda: asyncio.run(arescore(root / "a", env_spec=spec, run_dir=root / "a-rescored", workers=1)))
    return root


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, one per test module; Playwright is imported only when a test asks for it."""
    import playwright.sync_api as playwright_api

    if CHROMIUM is None:
        pytest.fail("the browser tests need Debian's chromium: apt-get install -y chromium", pytrace=False)
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A 1400 px desktop page; the dialogs it opened and the errors it threw are kept on it."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.dialogs = []
    opened.errors = []
    opened.on("dialog", lambda dialog: (opened.dialogs.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()
