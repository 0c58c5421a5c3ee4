"""Fixtures for the fault, crash, hostile-input and security tests (helpers live in ``support/``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "support"))
