"""The inspector's HTTP surface: one HTML shell for every view, and a JSON API.

Endpoints are sync functions on purpose: Starlette runs them in its thread pool,
so SQLite reads never block the event loop that serves the other requests.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from benchmax.access import AccessGuard
from benchmax.inspector import shell
from benchmax.inspector.catalog import RunCatalog, UnknownRun, redact, run_state, unscored
from benchmax.store import MAX_IMAGE_URI_CHARS, QUERY_SPEC, RolloutFilter, RunQueries, compare, provenance_changes

STATIC_DIR = Path(__file__).parent / "static"


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS, default=str)


def create_app(path: str | Path, *, token: str | None = None) -> Starlette:
    """The inspector over a run directory or a folder of runs."""
    catalog = RunCatalog(path)
    api = _Api(catalog)
    routes = [
        Route("/", api.shell),
        Route("/compare", api.shell),
        Route("/runs/{run}", api.shell),
        Route("/runs/{run}/groups/{group_id:path}", api.shell),
        Route("/runs/{run}/rollouts/{rollout_id:path}", api.shell),
        Route("/favicon.ico", _no_icon),
        Route("/api/runs", api.runs),
        Route("/api/compare", api.compare),
        Route("/api/runs/{run}/overview", api.overview),
        Route("/api/runs/{run}/distributions", api.distributions),
        Route("/api/runs/{run}/progress", api.progress),
        Route("/api/runs/{run}/steps", api.steps),
        Route("/api/runs/{run}/rollouts", api.rollouts),
        Route("/api/runs/{run}/rollouts/{rollout_id:path}", api.rollout),
        Route("/api/runs/{run}/download/{rollout_id:path}", api.download),
        Route("/api/runs/{run}/examples", api.examples),
        Route("/api/runs/{run}/groups", api.groups),
        Route("/api/runs/{run}/groups/{group_id:path}", api.group),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(AccessGuard, token=token)],
        exception_handlers={HTTPException: _error, UnknownRun: _unknown_run, ValueError: _bad_request},
    )
    app.state.catalog = catalog
    return app


class _Api:
    def __init__(self, catalog: RunCatalog) -> None:
        self.catalog = catalog
        # a comparison reads both runs whole: kept per state of the two runs
        self._compared: collections.OrderedDict[tuple[Any, ...], dict[str, Any]] = collections.OrderedDict()

    def shell(self, request: Request) -> HTMLResponse:
        return HTMLResponse(shell.render({"mode": "server", "image_limit": MAX_IMAGE_URI_CHARS}, root="/"))

    def _run(self, request: Request) -> RunQueries:
        return self.catalog.get(request.path_params["run"])

    def runs(self, request: Request) -> JSONResponse:
        rows = []
        for run_id in self.catalog.runs():
            try:
                rows.append(self.catalog.summary(run_id))
            except Exception as exc:
                rows.append({"run_id": run_id, "error": f"{type(exc).__name__}: {exc}"})
        return JSONResponse({"root": str(self.catalog.root), "runs": rows})

    def overview(self, request: Request) -> JSONResponse:
        return JSONResponse(run_overview(self._run(request), request.path_params["run"], self.catalog))

    def distributions(self, request: Request) -> JSONResponse:
        return JSONResponse(self._run(request).distributions())

    def progress(self, request: Request) -> JSONResponse:
        return JSONResponse(self._run(request).progress())

    def steps(self, request: Request) -> JSONResponse:
        return JSONResponse({"steps": self._run(request).steps()})

    def rollouts(self, request: Request) -> JSONResponse:
        params = request.query_params
        flt = RolloutFilter.from_params(params, params.getlist)
        page = self._run(request).rollouts(flt, **_paging(request, "seq"))
        return JSONResponse(page.to_dict())

    def rollout(self, request: Request) -> JSONResponse:
        run = self._run(request)
        record = run.rollout(request.path_params["rollout_id"])
        if record is None:
            raise HTTPException(404, f"no rollout {request.path_params['rollout_id']!r} in this run")
        return JSONResponse(with_envs(run, record))

    def download(self, request: Request) -> JSONResponse:
        rollout_id = request.path_params["rollout_id"]
        record = self._run(request).rollout(rollout_id)
        if record is None:
            raise HTTPException(404, f"no rollout {rollout_id!r} in this run")
        record.pop("nav", None)
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", rollout_id).strip("_") or "rollout"
        return JSONResponse(record, headers={"Content-Disposition": f'attachment; filename="{name}.json"'})

    def examples(self, request: Request) -> JSONResponse:
        params = request.query_params
        run = self._run(request)
        page = run.examples(**_paging(request, "idx"), text=params.get("q") or None, env=params.get("env") or None)
        answer = page.to_dict()
        if unscored(run.overview()):  # no example has a rate or a reward yet
            for row in answer["rows"]:
                row["pass_rate"] = row["mean_reward"] = None
        return JSONResponse(answer)

    def groups(self, request: Request) -> JSONResponse:
        params = request.query_params
        page = self._run(request).groups(
            **_paging(request, "order"),
            no_signal={"1": True, "0": False}.get(params.get("no_signal") or ""),
            example_id=params.get("example") or None,
            env=params.get("env") or None,
        )
        return JSONResponse(page.to_dict())

    def group(self, request: Request) -> JSONResponse:
        run = self._run(request)
        group = run.group(request.path_params["group_id"])
        if group is None:
            raise HTTPException(404, f"no group {request.path_params['group_id']!r} in this run")
        return JSONResponse(with_envs(run, group))

    def compare(self, request: Request) -> JSONResponse:
        params = request.query_params
        a, b = params.get("a"), params.get("b")
        if not a or not b:
            raise HTTPException(400, "compare needs two runs: ?a=RUN&b=RUN")
        left, right = self.catalog.get(a), self.catalog.get(b)
        options = {**_paging(request, "delta", descending=True), "changed_only": params.get("changed") == "1"}
        key = (a, b, tuple(sorted(options.items())), left.stamp(), right.stamp())
        result = self._compared.get(key)
        if result is None:
            changes = provenance_changes(left.run_meta().provenance, right.run_meta().provenance)
            provenance = [{"aspect": c.aspect, "warning": c.warning, "text": c.text} for c in changes]
            result = {**compare(left, right, **options), "a": a, "b": b, "provenance": redact(provenance)}
            rows = result["examples"]["rows"]
            short = left.short_ids([row["example_id"] for row in rows], among=[right])
            for row in rows:
                row["short_id"] = short[row["example_id"]]
            self._compared[key] = result
            while len(self._compared) > 32:
                self._compared.popitem(last=False)
        return JSONResponse(result)


def run_overview(run: RunQueries, run_id: str, catalog: RunCatalog) -> dict[str, Any]:
    """The run page's first answer: figures, where the run stands, its (redacted) metadata, what
    it rescored (if it is a rescore), and the table parameters the page may use (the static
    export hands the same to the browser)."""
    meta = run.run_meta()
    overview = run.overview()
    none_scored = unscored(overview)
    return {
        **overview,
        **({"pass_rate": None} if none_scored else {}),
        "progress": run.progress(),
        "suite": run.suite(),
        "run_id": run_id,
        "meta": redact(run.meta()),  # the page shows every stored key, as stored
        "rescore": catalog.rescore_of(meta),
        "state": run_state(
            meta.status_text, overview["rollouts"], overview["scored"], unscored=none_scored, error=meta.error
        ),
        "search": "words" if run.searchable else "substring",
        "query_spec": QUERY_SPEC,
    }


def with_envs(run: RunQueries, record: dict[str, Any]) -> dict[str, Any]:
    """A rollout or group page's record, saying whether its run holds several envs: the page
    names the env only then, so a run of one env reads as it always has (its ``env`` is the
    run's own). The downloadable rollout JSON is left as the store gives it."""
    record["several_envs"] = len(run.suite()) > 1
    return record


def _paging(request: Request, default_sort: str, *, descending: bool = False) -> dict[str, Any]:
    params = request.query_params
    desc = params.get("desc")
    return {
        "sort": params.get("sort") or default_sort,
        "descending": descending if desc is None else desc == "1",
        "offset": _int(params.get("offset"), 0, "offset"),
        "limit": _int(params.get("limit"), 50, "limit"),
    }


def _int(value: str | None, default: int, name: str) -> int:
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {value!r}") from None


def _no_icon(request: Request) -> Response:
    return Response(status_code=204)


async def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    return Response(exc.detail, status_code=exc.status_code, media_type="text/plain")


async def _unknown_run(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"no run named {exc.args[0]!r} here"}, status_code=404)


async def _bad_request(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=400)
