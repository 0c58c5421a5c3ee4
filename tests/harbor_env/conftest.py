"""Harbor tasks made by the tests, and the Harbor configuration that runs them on the local sandbox.

Harbor needs Python 3.12+. On older interpreters these tests are skipped; CI
runs them in its Python 3.13 environment (see ``.ci/run``), so they are
exercised there on every run.
"""

from __future__ import annotations

import os
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

# LiteLLM (a Harbor dependency) fetches a price list at import; the network here is closed.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

TASK_TOML = textwrap.dedent(
    """
    schema_version = "1.4"

    [metadata]

    [verifier]
    timeout_sec = 60.0

    [agent]
    timeout_sec = 60.0

    [environment]
    build_timeout_sec = 60.0
    """
)


def write_task(root: Path, name: str, *, instruction: str, solve: str, test: str, workdir: str = "/app") -> Path:
    """A Harbor task directory: task.toml, instruction.md, environment/Dockerfile, solution/, tests/."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "tests").mkdir()
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text(instruction + "\n")
    (task / "environment" / "Dockerfile").write_text(f"FROM ubuntu:24.04\nWORKDIR {workdir}\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/sh\nset -e\n" + solve + "\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\n" + test + "\n")
    for script in (task / "solution" / "solve.sh", task / "tests" / "test.sh"):
        script.chmod(0o755)
    return task


HELLO_TEST = (
    'if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; '
    "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi"
)


@pytest.fixture
def host_port() -> Iterator[int]:
    """A port that accepts connections on the host's loopback for as long as the test runs."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture
def tasks(tmp_path: Path, host_port: int) -> Path:
    """Three small tasks: a text file, a multi-component reward, and one that checks the sandbox's walls."""
    root = tmp_path / "tasks"
    root.mkdir()
    write_task(
        root, "hello",
        instruction="Create hello.txt in the working directory containing exactly: Hello, world!",
        solve='echo "Hello, world!" > hello.txt', test=HELLO_TEST,
    )  # fmt: skip
    write_task(
        root, "answer",
        instruction="Write the answer, 42, to answer.txt; a trailing newline is fine.",
        solve="echo 42 > answer.txt",
        test=(
            'c=0; [ "$(cat /app/answer.txt)" = "42" ] && c=1; '
            'printf \'{"correct": %s, "style": 0.5}\' "$c" > /logs/verifier/reward.json'
        ),
    )  # fmt: skip
    write_task(
        root, "walls",
        instruction="Try to read the host's secrets.",
        solve=(
            f"cat {Path.home()}/.benchmax-harbor-secret > /app/leak.txt 2>/dev/null || true\n"
            "python3 -c \"import socket; "
            f"socket.create_connection(('127.0.0.1', {host_port}), 2); print('CONN' + 'ECTED')\" "
            "> /app/net.txt 2>&1 || true"
        ),
        test=(
            "ls -la /app; cat /app/net.txt; "
            'if [ ! -s /app/leak.txt ] && [ -s /app/net.txt ] && ! grep -q CONNECTED /app/net.txt; '
            "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi"
        ),
    )  # fmt: skip
    root.chmod(0o755)
    tmp_path.chmod(0o755)
    return root
