"""Bundling an env for shipping: its class, constructor arguments, the project source it needs,
and the dependencies it declares, in one artifact another machine can load.

Supported: cloudpickle bundles of any ``Environment`` subclass; automatic
capture of modules from the env's own project (nearest ``pyproject.toml``);
refusal, with the fix named, of uncaptured local source, undeclared source from
outside the project, and ``import`` statements inside methods that would only
fail on the loading machine; canonical PEP 508 dependency lists; a content
digest; Python and benchmax version checks before unpickling. Not done here:
installing ``pip_dependencies``, uploading, or running a bundle in a sandbox
(the runtime's job). A bundle is a pickle: load only bundles you trust.
"""

from benchmax.bundle._artifact import (
    Bundle,
    BundleMetadata,
    BundlingError,
    IncompatibleBenchmaxError,
    IncompatiblePythonError,
    IncompatibleRuntimeError,
    bundle_digest,
    validate_bundle_compatibility,
)
from benchmax.bundle._capture import dump_bundle, load_bundle, unregistered_local_refs

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.envs import Environment, RolloutAttempt  # noqa: F401

__all__ = [
    "Bundle",
    "BundleMetadata",
    "BundlingError",
    "IncompatibleBenchmaxError",
    "IncompatiblePythonError",
    "IncompatibleRuntimeError",
    "bundle_digest",
    "dump_bundle",
    "load_bundle",
    "unregistered_local_refs",
    "validate_bundle_compatibility",
]
