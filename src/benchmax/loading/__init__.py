"""Loading an env from what a user types: a file, a module, a directory, an installed package, a URL,
or another framework's env (``inspect:``, ``reasoning-gym:``, ...).

Every face (eval, validate, train, rescore, serve, the trainer adapters, Ray workers) turns a spec into an
env class and its examples here; the contract in :mod:`benchmax.envs` knows nothing of specs, files or
entry points. Installed env packages are found through the ``benchmax.envs`` entry-point group.
"""

from benchmax.loading._packages import ENTRY_POINT_GROUP, InstalledEnv, installed_envs
from benchmax.loading._specs import (
    EnvSpec,
    ExampleStream,
    adapter_name,
    collect_examples,
    data_directories,
    data_directory,
    example_location,
    load_env,
    locate_dataset,
    open_dataset,
    open_examples,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "EnvSpec",
    "ExampleStream",
    "InstalledEnv",
    "adapter_name",
    "collect_examples",
    "data_directories",
    "data_directory",
    "example_location",
    "installed_envs",
    "load_env",
    "locate_dataset",
    "open_dataset",
    "open_examples",
]
