"""What a mixture refuses: every message names the env it is about."""

from __future__ import annotations

from benchmax.envs import EnvSpecError


class MixError(EnvSpecError):
    """A mixture that cannot run as given (a bad weight, two envs of one name, an env that failed to load).

    An :class:`~benchmax.envs.EnvSpecError`: to every face it is a bad env spec, caught
    and printed the same way, before any rollout runs.
    """
