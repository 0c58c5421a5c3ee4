"""Hugging Face ``datasets`` as a benchmax dataset (the ``hf`` extra): local files, ``save_to_disk`` or the Hub."""

from benchmax.hf._dataset import HFDataset

__all__ = ["HFDataset"]
