"""benchmax 0.2.x's module path ``benchmax.sft.rows``: its names, from where they live now."""

from benchmax.sft._dataset import MAX_ROW_BYTES
from benchmax.sft._rows import MAX_MESSAGES, MAX_METADATA_BYTES, MAX_TOOLS, RESERVED_METADATA_PREFIX, validate_row

__all__ = [
    "MAX_MESSAGES",
    "MAX_METADATA_BYTES",
    "MAX_ROW_BYTES",
    "MAX_TOOLS",
    "RESERVED_METADATA_PREFIX",
    "validate_row",
]
