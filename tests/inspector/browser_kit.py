"""What the inspector's browser tests share: the Chromium they drive, a real inspector server,
and waits on what the page has drawn (never on time). The ``browser`` and ``page`` fixtures
that use them are in ``conftest.py``.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from benchmax.access import bind
from benchmax.inspector import create_app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
"""Debian's ``chromium`` (Playwright drives it; its own browser downloads are not used)."""

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class InspectorServer:
    """A real uvicorn server of the inspector over ``root``, on a free loopback port, in a thread."""

    def __init__(self, root: Path, token: str | None = None) -> None:
        sock = bind("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(root, token=token), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the inspector did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def open_view(page: Any, url: str, view: str) -> None:
    """Go to ``url`` and wait until the app has rendered ``view`` (``body[data-ready]``)."""
    page.goto(url)
    page.wait_for_selector(f"body[data-ready={view}]", timeout=15000)


_TABLE_ANSWERS = """(want) => {
  const url = new URL(location.href);
  if (!Object.entries(want).every(([key, value]) => (url.searchParams.get(key) || '') === value)) return false;
  const area = document.querySelector('.tab-area');
  return !!area && area.dataset.drawn === location.search && area.getAttribute('aria-busy') === 'false';
}"""


def table_answers(page: Any, **params: str) -> None:
    """Wait until the URL carries ``params`` and the run page's table is the one drawn for that URL.

    A filter or a sort changes the URL at once and redraws the table when its answer arrives:
    the old table stays on screen meanwhile, and may even have the row count the test expects.
    """
    page.wait_for_function(_TABLE_ANSWERS, arg=params, timeout=15000)


def table_ids(page: Any, url: str) -> list[str]:
    """The full id of each row of the run page's table at ``url`` (a served or an exported page)."""
    open_view(page, url, "run")
    table_answers(page)
    # the link's title is the full id (the text shows the short one)
    links = page.locator("table.grid tbody a.id")
    return [links.nth(index).get_attribute("title") for index in range(links.count())]


def fits(page: Any, width: int) -> None:
    """Nothing on the page is wider than the viewport (no sideways scrolling)."""
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= width, f"the page is {wide}px wide in a {width}px viewport"
