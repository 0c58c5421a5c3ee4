"""``packaging/install-local.sh`` (README command 1's install): it checks what the build needs and
says what the long llama.cpp compile is, and for about how long, before pip starts it.

A stand-in ``python`` answers ``-m pip`` (and the ``import llama_cpp`` probe) so no package is
installed; every other call runs the real interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "packaging" / "install-local.sh"


def _shim(folder: Path, *, version_ok: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python3"
    real = sys.executable
    shim.write_text(
        "#!/bin/bash\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "PIP-STARTED CMAKE_ARGS=$CMAKE_ARGS"; exit 0; fi\n'
        'if [ "$1" = "-c" ] && [[ "$2" == *"import llama_cpp"* ]]; then exit 1; fi\n'
        + ("" if version_ok else 'if [ "$1" = "-V" ]; then echo "Python 3.10.0"; exit 0; fi\n'
           'if [ "$1" = "-c" ] && [[ "$2" == *"version_info < (3, 11)"* ]]; then exit 1; fi\n')
        + f'exec {real} "$@"\n'
    )  # fmt: skip
    shim.chmod(0o755)
    return shim


def _path_with(folder: Path, *tools: str) -> str:
    for tool in ("bash", "dirname", "find", "getconf", *tools):
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return str(folder)


def _run(tmp_path: Path, shim: Path, path: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("CMAKE_ARGS", "PYTHON")}
    env.update(PATH=path, PYTHON=str(shim))
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path
    )


def test_it_says_what_the_compile_is_and_how_long_before_pip_starts_it(tmp_path):
    shim = _shim(tmp_path / "bin")

    result = _run(tmp_path, shim, _path_with(tmp_path / "bin", "cc", "c++"))

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("compiles llama.cpp") < out.index("PIP-STARTED"), out
    assert "about 3 minutes on an idle 2-core machine" in out
    assert "-DGGML_NATIVE=OFF" in out and "llama-cpp-lean.cmake" in out, "the portable, lean build"


def test_without_a_compiler_it_stops_before_pip_and_says_what_to_install(tmp_path):
    shim = _shim(tmp_path / "bin")

    result = _run(tmp_path, shim, _path_with(tmp_path / "bin"))

    assert result.returncode == 1
    assert "needs a C and C++ compiler" in result.stderr and "build-essential" in result.stderr
    assert "PIP-STARTED" not in result.stdout


def test_an_old_python_is_refused_with_how_to_make_a_venv_of_a_newer_one(tmp_path):
    shim = _shim(tmp_path / "bin", version_ok=False)

    result = _run(tmp_path, shim, _path_with(tmp_path / "bin", "cc", "c++"))

    assert result.returncode == 1
    assert "benchmax needs Python >= 3.11; Python 3.10.0" in result.stderr
    assert "venv" in result.stderr and "PIP-STARTED" not in result.stdout
