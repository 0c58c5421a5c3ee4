"""The one HTML page every view shares; the JS app renders the view from JSON.

The page carries no inline script (the CSP forbids it): its boot data rides in a
``<script type="application/json">`` block, escaped so no ``</script>`` or
``<!--`` in run content can end it.
"""

from __future__ import annotations

from html import escape
from importlib.resources import files
from typing import Any

import orjson


def boot_json(data: Any) -> str:
    """JSON safe inside a ``<script type="application/json">`` element."""
    text = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render(boot: dict[str, Any], *, root: str, title: str = "benchmax inspector") -> str:
    """The page, with ``root`` the (relative, in a static export) prefix of the assets."""
    template = files("benchmax.inspector").joinpath("shell.html").read_text(encoding="utf-8")
    return (
        template.replace("{{title}}", escape(title))
        .replace("{{root}}", escape(root, quote=True))
        .replace("{{boot}}", boot_json(boot))
    )
