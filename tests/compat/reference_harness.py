"""Run one compat scenario on whichever benchmax this interpreter imports, and print what happened.

The same file runs under this project's Python (``PYTHONPATH=src``) and under
benchmax 0.2.5's (the venv ``bench/reference/setup.sh`` builds), so it only
uses what both versions offer: ``create_dataset``, ``run_group``,
``RolloutRequest`` and ``StaticBearerAuth`` from ``benchmax.envs``, and
``benchmax.sft`` / ``benchmax.bundle`` for the data-contract checks.

    python tests/compat/reference_harness.py SPEC.json  ->  one JSON object on stdout

A scenario spec (``kind: "env"``)::

    {"env_file": ".../math_env.py", "env_class": "MathEnv", "env_kwargs": {},
     "data_dir": "...", "split": "train", "group_size": 1, "base_url": "...",
     "max_examples": null | N | "omit", "auth": "static" | "custom", "bind": {"judge": "token"}}

Failures are reported, not raised, so one broken scenario still says where it
broke: ``{"stage": "import" | "construct" | "dataset" | "run", "error": {...}}``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import traceback
from pathlib import Path
from typing import Any


def _error(stage: str, exc: BaseException) -> dict[str, Any]:
    return {
        "stage": stage,
        "error": {
            "type": type(exc).__name__,
            "message": str(exc),
            "notes": list(getattr(exc, "__notes__", [])),
            "traceback": traceback.format_exc()[-4000:],
        },
    }


class RotatingTokenAuth:
    """A custom ModelAuth: a new bearer token per request, named by the rollout it authorises."""

    def __init__(self) -> None:
        self.calls = 0

    async def headers_for_request(self, context: Any) -> dict[str, str]:
        self.calls += 1
        return {"Authorization": f"Bearer rotating-{self.calls}", "X-Benchmax-Rollout": context.rollout_id}


def _load_class(path: str, name: str) -> type:
    file = Path(path)
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(f"compat_env_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def _outcome(outcome: Any) -> dict[str, Any]:
    return {
        "termination_reason": str(outcome.termination_reason),
        "rewards": {key: float(value) for key, value in sorted(dict(outcome.rewards or {}).items())},
        "error": outcome.error,
    }


async def run_env(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        env_class = _load_class(spec["env_file"], spec["env_class"])
        from benchmax.envs import RolloutRequest, StaticBearerAuth
    except BaseException as exc:
        return _error("import", exc)
    try:
        env = env_class(**spec.get("env_kwargs", {}))
    except BaseException as exc:
        return _error("construct", exc)
    result: dict[str, Any] = {"groups": []}
    try:
        try:
            base_dir = Path(spec["data_dir"])
            limit = spec.get("max_examples", "omit")
            if limit == "omit":
                dataset = await env.create_dataset(spec.get("split", "train"), base_dir)
            else:
                dataset = await env.create_dataset(spec.get("split", "train"), base_dir, max_examples=limit)
            examples = list(dataset)
        except BaseException as exc:
            return _error("dataset", exc)
        result["dataset_size"] = len(examples)
        result["example_ids_unique"] = len({example.id for example in examples}) == len(examples)
        auth: Any = RotatingTokenAuth() if spec.get("auth") == "custom" else StaticBearerAuth("sk-compat")
        for index, example in enumerate(examples):
            requests = [
                RolloutRequest(
                    rollout_id=f"ex{index}-r{sibling}",
                    example=example,
                    model="scripted",
                    base_url=spec["base_url"],
                    model_auth=auth,
                    split=spec.get("split", "train"),
                )
                for sibling in range(spec.get("group_size", 1))
            ]
            try:
                outcomes = await _run_group(env, requests, spec.get("bind"))
            except BaseException as exc:
                result["groups"].append(_error("run", exc))
                continue
            result["groups"].append({"outcomes": [_outcome(outcomes[request.rollout_id]) for request in requests]})
    finally:
        try:
            await env.aclose()
        except BaseException as exc:
            result["aclose_error"] = _error("aclose", exc)["error"]
    return result


async def _run_group(env: Any, requests: list[Any], bind: dict[str, str] | None) -> Any:
    if not bind:
        return await env.run_group(requests)
    from benchmax.auth import StaticBearerAuth, bind_model_auth

    with bind_model_auth({name: StaticBearerAuth(token) for name, token in bind.items()}):
        return await env.run_group(requests)


def run_sft(spec: dict[str, Any]) -> dict[str, Any]:
    from benchmax.sft import SftDataset, SftDatasetError

    results = []
    for path in spec["paths"]:
        try:
            dataset = SftDataset.from_jsonl(path)
        except SftDatasetError as exc:
            results.append({"issues": [issue.as_dict() for issue in exc.issues], "message": str(exc)})
        else:
            results.append({"canonical": dataset.to_jsonl_bytes().decode("utf-8")})
    return {"results": results}


def run_bundle_metadata(spec: dict[str, Any]) -> dict[str, Any]:
    from benchmax.bundle import Bundle, BundleMetadata, bundle_digest

    results = []
    for case in spec["cases"]:
        try:
            metadata = BundleMetadata(
                pip_dependencies=case["pip_dependencies"],
                python_version=case["python_version"],
                benchmax_version=case["benchmax_version"],
                env_class_source=case["env_class_source"],
            )
        except (TypeError, ValueError) as exc:
            results.append({"error": type(exc).__name__})
            continue
        bundle = Bundle(pickled=case["pickled"].encode("utf-8"), metadata=metadata)
        results.append(
            {
                "pip_dependencies": list(metadata.pip_dependencies),
                "metadata_json": metadata.to_json_bytes().decode("utf-8"),
                "digest": bundle_digest(bundle),
            }
        )
    return {"results": results}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    kind = spec.get("kind", "env")
    if kind == "env":
        output = asyncio.run(run_env(spec))
    elif kind == "sft":
        output = run_sft(spec)
    elif kind == "bundle_metadata":
        output = run_bundle_metadata(spec)
    else:
        raise SystemExit(f"unknown scenario kind {kind!r}")
    import benchmax

    output["benchmax"] = getattr(benchmax, "__version__", None) or _distribution_version()
    print(json.dumps(output, sort_keys=True))


def _distribution_version() -> str:
    from importlib.metadata import version

    return version("benchmax")


if __name__ == "__main__":
    main()
