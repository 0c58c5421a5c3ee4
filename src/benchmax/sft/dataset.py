"""benchmax 0.2.x's module path ``benchmax.sft.dataset``: its names, from where they live now."""

from benchmax.sft._dataset import SFT_DATASET_FORMAT, SftDataset

__all__ = ["SFT_DATASET_FORMAT", "SftDataset"]
