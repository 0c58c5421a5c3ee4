"""Other frameworks' envs, run unchanged as benchmax envs: ``inspect:``, ``reasoning-gym:``, ``verifiers:``, ...

Each adapter maps a framework's env onto the ``BaseEnv`` contract declaratively (its dataset
becomes examples, its prompt shaping builds ``prompt_messages``, its own scorers score), so
every face that loads a spec (eval, validate, train, rescore, mixtures, serve) runs it as it
runs any env: :mod:`benchmax.loading` hands a prefixed spec to :func:`adapter_env_class`.
Scores are the framework's own, computed by its own code. A framework is imported only when
a spec names it; a missing one is reported with the ``pip install`` line that adds it.
"""

from benchmax.adapters._extras import install_line
from benchmax.adapters._inspect import InspectEnv
from benchmax.adapters._reasoning_gym import ReasoningGymEnv, split_seed
from benchmax.adapters._specs import (
    ADAPTER_PREFIXES,
    adapter_directory,
    adapter_env_class,
    adapter_env_name,
    is_adapter_spec,
)
from benchmax.adapters._verifiers import VerifiersEnv

__all__ = [
    "ADAPTER_PREFIXES",
    "InspectEnv",
    "ReasoningGymEnv",
    "VerifiersEnv",
    "adapter_directory",
    "adapter_env_class",
    "adapter_env_name",
    "install_line",
    "is_adapter_spec",
    "split_seed",
]
