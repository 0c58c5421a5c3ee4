"""Glue for trainers that take a Python callable instead of running benchmax's engine."""

from benchmax.train.adapters.verl import VerlRewardAdapter, to_verl_row

__all__ = ["VerlRewardAdapter", "to_verl_row"]
