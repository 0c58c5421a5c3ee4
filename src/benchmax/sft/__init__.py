"""Supervised-finetuning data in the ``benchmax-sft-v1`` row contract (see :class:`SftDataset`).

SFT needs no environment: build a validated dataset from chat rows and hand it
to the trainer. Validation is strict and all-or-nothing, with every issue
located by line, row and path.
"""

from benchmax.sft._dataset import SFT_DATASET_FORMAT, SftDataset
from benchmax.sft._issues import SftDatasetError, SftIssue

__all__ = ["SFT_DATASET_FORMAT", "SftDataset", "SftDatasetError", "SftIssue"]
