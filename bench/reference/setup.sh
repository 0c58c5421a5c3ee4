#!/usr/bin/env bash
# Build the reference venv: benchmax 0.2.5 from PyPI on Python 3.12, next to (not inside) ours.
#
# benchmax 0.2.5 requires Python 3.12 exactly, and `pip install benchmax==0.2.5` alone
# resolves openai 3.x, which no longer ships httpx, so importing benchmax fails: pin openai<3.
# Python 3.12 comes from, in order: $BENCHMAX_REF_PYTHON, `python3.12` on PATH, pyenv's 3.12.x,
# or `pyenv install 3.12` (builds from source, several minutes on 2 cores).
set -euo pipefail

VENV="${BENCHMAX_REF_VENV:-$HOME/.cache/benchmax/bench-reference-venv}"

find_python() {
  if [[ -n "${BENCHMAX_REF_PYTHON:-}" ]]; then echo "$BENCHMAX_REF_PYTHON"; return; fi
  for candidate in python3.12 "$HOME/.pyenv/versions/"3.12*/bin/python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      command -v "$candidate"; return
    fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    echo "no Python 3.12 found; building one with pyenv (minutes)" >&2
    pyenv install --skip-existing 3.12 >&2
    "$(pyenv root)/versions/$(pyenv latest 3.12)/bin/python3.12" -c 'import sys; print(sys.executable)'
    return
  fi
  echo "benchmax 0.2.5 needs Python 3.12: install it, or set BENCHMAX_REF_PYTHON" >&2
  exit 1
}

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import benchmax, openai' 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi
PYTHON="$(find_python)"
"$PYTHON" -m venv --clear "$VENV" >&2
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
  "benchmax==0.2.5" "openai>=1.0,<3" orjson >&2
"$VENV/bin/python" -c 'import benchmax, openai' >&2
echo "$VENV/bin/python"
