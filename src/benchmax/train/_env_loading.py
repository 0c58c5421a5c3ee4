"""What a training run trains on: the env or mixture given, or loaded from its spec or the config's
mixture before anything else (an env that fails to load names itself and nothing is created), and
where its data is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmax.aio import LoopThread
from benchmax.envs import BaseEnv
from benchmax.loading import EnvSpec, data_directories
from benchmax.mix import EnvMix, MemberSpec, MixSpec
from benchmax.train._config import TrainConfig, TrainError


def _train_env(
    env: str | BaseEnv | EnvMix, config: TrainConfig
) -> tuple[Any, bool, EnvMix | None, str, tuple[Path, ...], TrainConfig]:
    """The env trained on (given, or loaded from its spec or the config's mixture), whether the
    session owns it, its mixture, its name, where its data is read, and the config naming its mixture."""
    from dataclasses import replace

    mix: EnvMix | None = None
    if isinstance(env, EnvMix):
        env_obj, owns_env, mix = env, False, env
        spec_name = config.env or "+".join(member.name for member in env.members)
        places: tuple[Path, ...] = (Path(config.data_dir or Path.cwd()),)
        if config.mix is None:
            config = replace(config, mix=_mix_spec(env))
    elif isinstance(env, BaseEnv):
        env_obj, owns_env = env, False
        spec_name = config.env or type(env).__name__
        places = (Path(config.data_dir or Path.cwd()),)
    elif config.mix is not None:
        if env:
            raise TrainError(f"give the env {env!r} or the mixture (config.mix), not both")
        # loaded first, before the model: an env that fails to load names itself and nothing is created
        loader = LoopThread(name="benchmax-mix-load")
        try:
            env_obj = mix = loader.run(EnvMix.load(config.mix))
        finally:
            loader.close()
        owns_env = True
        spec_name = config.env or "+".join(member.name for member in config.mix.members)
        places = (Path.cwd(),)
    else:
        spec_name = env or config.env
        if not spec_name:
            raise TrainError("no environment given: pass ENV (path/to/env.py[:Class], module:Class or a directory)")
        env_obj, places = _load_env(spec_name, config)
        owns_env = True
    return env_obj, owns_env, mix, spec_name, places, config


def _mix_spec(mix: EnvMix) -> MixSpec | None:
    """How a mixture given as an instance is stored, so ``benchmax train --resume`` can load it again:
    known when every member was loaded from a spec (``None`` otherwise: resume it from Python)."""
    members = []
    for member in mix.members:
        if member.spec is None:
            return None
        members.append(
            MemberSpec(
                member.name,
                member.spec,
                member.weight,
                dict(member.env_kwargs),
                member.max_examples,
                # one directory: the one given (the default is the env's directory and its data/)
                member.data_dirs[0] if len(member.data_dirs) == 1 else None,
            )
        )
    return MixSpec(tuple(members), seed=mix.seed)


def _load_env(spec: str, config: TrainConfig) -> tuple[BaseEnv, tuple[Path, ...]]:
    """The env, and where its data is looked for (its train split picks the one that holds it)."""
    env_spec = EnvSpec(spec, dict(config.env_kwargs or {}))
    env = env_spec.load()
    if not isinstance(env, BaseEnv):
        raise TrainError(f"{spec}: {type(env).__name__} is not a BaseEnv; training drives the standard model loop")
    return env, data_directories(env_spec, config.data_dir)
