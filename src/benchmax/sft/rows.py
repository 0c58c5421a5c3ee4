"""benchmax 0.2.x's module path ``benchmax.sft.rows``: its names, from where they live now."""

from benchmax.sft._dataset import MAX_ROW_BYTES
from benchmax.sft._rows import MAX_MESSAGES, MAX_METADATA_BYTES, MAX_TOOLS, RESERVED_METADATA_PREFIX, validate_row

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.sft._strict_json import StrictJsonError, canonical_json_bytes, check_json_tree, parse_strict_json  # noqa: F401

__all__ = [
    "MAX_MESSAGES",
    "MAX_METADATA_BYTES",
    "MAX_ROW_BYTES",
    "MAX_TOOLS",
    "RESERVED_METADATA_PREFIX",
    "validate_row",
]
