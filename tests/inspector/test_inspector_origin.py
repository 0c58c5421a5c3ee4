"""A page at another origin cannot read the inspector, and nothing on it changes state (issue #35).

A real uvicorn server on loopback, spoken to with httpx sending what a browser
sends: a cross-origin ``fetch`` carries its page's ``Origin``; a sandboxed frame
or a ``file://`` page sends ``Origin: null``. DNS rebinding (a foreign ``Host``)
is refused by the loopback rule, tested in ``test_inspector_security.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_kit import InspectorServer

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def servers(runs_dir: Path) -> Iterator[tuple[InspectorServer, InspectorServer]]:
    plain, guarded = InspectorServer(runs_dir), InspectorServer(runs_dir, token=TOKEN)
    yield plain, guarded
    plain.stop()
    guarded.stop()


@pytest.mark.parametrize("path", ["/api/runs", "/api/runs/a/overview", "/api/runs/a/rollouts", "/"])
@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "http://localhost"])
def test_a_page_at_another_origin_cannot_read_the_inspector(servers, path, origin) -> None:
    for server, headers in ((servers[0], {}), (servers[1], {"Authorization": f"Bearer {TOKEN}"})):
        read = httpx.get(server.base + path, headers={**headers, "Origin": origin})
        assert read.status_code == 403, read.text
        assert "Origin" in read.text and "access-control-allow-origin" not in read.headers
        assert read.headers["content-type"].startswith("text/plain")  # nothing of the runs


def test_its_own_pages_and_programs_still_read_it(servers) -> None:
    plain, guarded = servers
    assert httpx.get(f"{plain.base}/api/runs").status_code == 200  # a program: no Origin
    own = httpx.get(f"{plain.base}/api/runs", headers={"Origin": plain.base})  # the inspector's own page
    assert own.status_code == 200 and own.json()["runs"]
    assert httpx.get(f"{guarded.base}/api/runs", headers={"Origin": guarded.base}).status_code == 401
    bearer = {"Authorization": f"Bearer {TOKEN}", "Origin": guarded.base}
    assert httpx.get(f"{guarded.base}/api/runs", headers=bearer).status_code == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/api/runs", "/api/runs/a/rollouts", "/runs/a", "/"])
def test_no_route_changes_state_and_a_foreign_page_is_refused_before_routing(servers, method, path) -> None:
    plain = servers[0]
    local = httpx.request(method, plain.base + path, content=b"{}", headers={"Content-Type": "application/json"})
    assert local.status_code == 405  # the inspector only reads
    foreign = httpx.request(
        method, plain.base + path, content=b"x", headers={"Content-Type": "text/plain", "Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
