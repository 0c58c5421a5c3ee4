"""The runner tests' CLI kit (``runkit``) and this folder's Inspect model provider are importable here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "runner" / "support"))
sys.path.insert(0, str(Path(__file__).parent))
