"""benchmax 0.2.x's module path ``benchmax.sft.dataset``: its names, from where they live now."""

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.sft._dataset import (
    MAX_ROW_BYTES,  # noqa: F401
    SFT_DATASET_FORMAT,
    SftDataset,
)
from benchmax.sft._issues import SftDatasetError, SftIssue  # noqa: F401
from benchmax.sft._rows import validate_row  # noqa: F401
from benchmax.sft._strict_json import StrictJsonError, canonical_json_bytes, check_json_tree, parse_strict_json  # noqa: F401

__all__ = ["SFT_DATASET_FORMAT", "SftDataset"]
