"""A verifiers plugin module, as a user writes one: the taskset and harness benchmax ships."""

from benchmax.train.adapters.verifiers import BenchmaxHarness, BenchmaxTaskset

__all__ = ["BenchmaxHarness", "BenchmaxTaskset"]
