"""Mixtures of envs: several envs run as one env, one run, one store.

``EnvMix([MixMember("math", MathEnv(), weight=0.5), ...], seed=0)`` is an
:class:`~benchmax.envs.Environment`: its dataset draws from every member (by
weight for training, all of each for eval), and each group runs on its own
member. ``MixSpec`` / ``MemberSpec`` name a mixture by env specs, as a run
stores it (``benchmax eval A B C``, ``benchmax train --env A=0.5 --env B=0.5``).
"""

from benchmax.mix._errors import MixError
from benchmax.mix._members import MemberSpec, MixMember, MixSpec
from benchmax.mix._mix import SEPARATOR, EnvMix, MixDataset, close_members, mixture_id

__all__ = [
    "SEPARATOR",
    "EnvMix",
    "MemberSpec",
    "MixDataset",
    "MixError",
    "MixMember",
    "MixSpec",
    "close_members",
    "mixture_id",
]
