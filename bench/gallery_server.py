"""Serve a gallery example's scripted solving policy as an OpenAI-compatible model.

    python bench/gallery_server.py examples/sql --port 8123 &
    benchmax eval examples/sql --max-examples 8 --base-url http://127.0.0.1:8123/v1 --model scripted

The policy comes from ``examples/NAME/policy.py`` (``solver(examples)``), fed
both splits of the env built with the same ``--env-arg``s as the eval, so it
knows every answer: the row this gives in ``examples/README.md`` measures the
env's own overhead (tools, sandbox, scoring), not a model.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
from pathlib import Path

from aiohttp import web

from benchmax.cli._eval import parse_env_args
from benchmax.loading import EnvSpec
from benchmax.testing import ScriptedServer


async def _examples(spec: EnvSpec) -> list:
    env = spec.load_class()(**dict(spec.kwargs))
    try:
        return [example for split in ("train", "eval") for example in await env.create_dataset(split, spec.directory)]
    finally:
        await env.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("example", type=Path, help="an examples/NAME directory with policy.py")
    parser.add_argument("--env-arg", action="append", default=[], help="constructor kwarg key=value, as for eval")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    spec = EnvSpec(str(args.example), parse_env_args(args.env_arg))
    module_spec = importlib.util.spec_from_file_location("gallery_policy", args.example / "policy.py")
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    policy = module.solver(asyncio.run(_examples(spec)))
    server = ScriptedServer(policy, host=args.host, port=args.port)
    print(f"serving {args.example}'s policy on http://{args.host}:{args.port}/v1", flush=True)
    web.run_app(server.app(), host=args.host, port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
