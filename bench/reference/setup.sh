#!/usr/bin/env bash
# Build the reference venv: benchmax 0.2.5 from PyPI on Python 3.12, next to (not inside) ours.
#
# benchmax 0.2.5 requires Python 3.12 exactly, and `pip install benchmax==0.2.5` alone
# resolves openai 3.x, which no longer ships httpx, so importing benchmax fails: pin openai<3.
# Python 3.12 comes from, in order: $BENCHMAX_REF_PYTHON, `python3.12` on PATH, pyenv's 3.12.x,
# or apt-get (as root, where the configured repositories serve python3.12). Nothing else is
# downloaded: with none of these it exits 3 and says why, and the caller skips what needs it.
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
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1 \
    && apt-cache show python3.12-venv >/dev/null 2>&1; then
    echo "no Python 3.12 found; installing python3.12 with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.12 python3.12-venv >/dev/null
    command -v python3.12; return
  fi
  echo "benchmax 0.2.5 needs Python 3.12: none on PATH, in pyenv or from apt-get here;" \
    "install one, or set BENCHMAX_REF_PYTHON to it" >&2
  exit 3
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
