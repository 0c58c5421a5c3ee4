"""benchmax 0.2.x's module path ``benchmax.sft.issues``: its names, from where they live now."""

from benchmax.sft._issues import SftDatasetError, SftIssue

__all__ = ["SftDatasetError", "SftIssue"]
