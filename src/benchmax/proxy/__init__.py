"""The recording proxy: agent programs call the run's model through benchmax, one lease per rollout.

An agent written with any OpenAI-compatible SDK gets a lease's ``base_url`` and
``api_key``; its calls go through the run's model client (retries, outage gate,
replicas, response cache, cost ledger) and each is recorded, with token ids and
logprobs when the server returns them, against the rollout that holds the lease.
See ``docs/agents.md`` ("The recording proxy").
"""

from benchmax.proxy._lease import ProxyLease
from benchmax.proxy._proxy import DEFAULT_MAX_BODY_BYTES, ProxyError, RecordingProxy
from benchmax.proxy._records import RecordedCall

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ProxyError", "ProxyLease", "RecordedCall", "RecordingProxy"]
