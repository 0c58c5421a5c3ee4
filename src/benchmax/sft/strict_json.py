"""benchmax 0.2.x's module path ``benchmax.sft.strict_json``: its names, from where they live now."""

from benchmax.sft._strict_json import (
    MAX_JSON_DEPTH,
    StrictJsonError,
    canonical_json_bytes,
    check_json_tree,
    parse_strict_json,
)

__all__ = ["MAX_JSON_DEPTH", "StrictJsonError", "canonical_json_bytes", "check_json_tree", "parse_strict_json"]
