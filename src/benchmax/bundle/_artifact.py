"""The bundle artifact: pickled env plus metadata readable without unpickling, and its identity."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from benchmax.errors import BenchmaxError


class BundlingError(BenchmaxError):
    """The env could not be bundled, or a bundle's payload is not a usable env."""


class IncompatibleRuntimeError(BenchmaxError):
    """The bundle was made for another Python or benchmax than the one loading it."""


class IncompatiblePythonError(IncompatibleRuntimeError):
    """The loading interpreter's major.minor differs from the bundle's ``python_version``."""


class IncompatibleBenchmaxError(IncompatibleRuntimeError):
    """The loading benchmax's major.minor differs from the bundle's ``benchmax_version``."""


_KEYS = frozenset({"pip_dependencies", "python_version", "benchmax_version", "env_class_source"})
_DIGEST_DOMAIN = b"benchmax.bundle.v1\0"


def benchmax_version() -> str:
    """The installed benchmax distribution's version, or ``"unknown"`` for an uninstalled checkout."""
    try:
        return version("benchmax")
    except PackageNotFoundError:
        return "unknown"


def normalize_pip_dependencies(dependencies: Sequence[str]) -> tuple[str, ...]:
    """PEP 508 requirements in canonical spelling, sorted; one declaration per distribution."""
    if isinstance(dependencies, str | bytes) or not isinstance(dependencies, Sequence):
        raise TypeError("pip dependencies must be a sequence of PEP 508 strings, e.g. ['numpy>=2']")
    seen: dict[str, int] = {}
    canonical = []
    for index, value in enumerate(dependencies):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"dependency at index {index} must be a non-empty string")
        try:
            requirement = Requirement(value.strip())
        except InvalidRequirement as exc:
            raise ValueError(f"dependency at index {index} is not valid PEP 508: {value!r}") from exc
        name = canonicalize_name(requirement.name)
        if name in seen:
            raise ValueError(
                f"dependency target {name!r} is declared more than once (indexes {seen[name]} and {index}); "
                "combine constraints and extras into one declaration"
            )
        seen[name] = index
        canonical.append(_render(requirement))
    return tuple(sorted(canonical))


def _render(requirement: Requirement) -> str:
    text = canonicalize_name(requirement.name)
    if requirement.extras:
        text += "[" + ",".join(sorted(canonicalize_name(extra) for extra in requirement.extras)) + "]"
    text += f" @ {requirement.url}" if requirement.url else str(requirement.specifier)
    if requirement.marker is not None:
        text += f"; {requirement.marker}"
    return text


def declared_distributions(pip_dependencies: Sequence[str]) -> set[str]:
    """Canonical names of the distributions ``pip_dependencies`` declares (invalid entries skipped)."""
    names = set()
    for dependency in pip_dependencies:
        try:
            names.add(canonicalize_name(Requirement(dependency).name))
        except InvalidRequirement:
            continue
    return names


@dataclass(frozen=True)
class BundleMetadata:
    """What a runtime reads before unpickling: dependencies to install, versions to check, the source to show."""

    pip_dependencies: tuple[str, ...]
    python_version: str
    benchmax_version: str
    env_class_source: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pip_dependencies", normalize_pip_dependencies(self.pip_dependencies))
        for name in ("python_version", "benchmax_version"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string")
        if self.env_class_source is not None and not isinstance(self.env_class_source, str):
            raise TypeError("env_class_source must be a string or None")

    def to_json_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces, UTF-8): the bytes the digest covers."""
        return json.dumps(
            {
                "pip_dependencies": self.pip_dependencies,
                "python_version": self.python_version,
                "benchmax_version": self.benchmax_version,
                "env_class_source": self.env_class_source,
            },
            ensure_ascii=False,
            separators=(",", ":"),
            sort_keys=True,
        ).encode("utf-8")

    @classmethod
    def from_json_bytes(cls, data: bytes) -> BundleMetadata:
        try:
            fields = json.loads(data.decode("utf-8"))
        except (AttributeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError("bundle metadata must be a UTF-8 JSON object") from exc
        if not isinstance(fields, dict):
            raise ValueError("bundle metadata must be a JSON object")
        unknown = sorted(set(fields) - _KEYS)
        if unknown:
            raise ValueError(f"bundle metadata has unsupported keys {unknown}; re-bundle with a current benchmax")
        missing = [key for key in ("pip_dependencies", "python_version", "benchmax_version") if key not in fields]
        if missing:
            raise ValueError(f"bundle metadata is missing {missing[0]!r}")
        return cls(
            pip_dependencies=fields["pip_dependencies"],
            python_version=fields["python_version"],
            benchmax_version=fields["benchmax_version"],
            env_class_source=fields.get("env_class_source"),
        )


@dataclass(frozen=True)
class Bundle:
    """A shippable env: ``pickled`` is ``cloudpickle.dumps((env_class, constructor_args))``."""

    pickled: bytes
    metadata: BundleMetadata

    def __post_init__(self) -> None:
        if not isinstance(self.pickled, bytes):
            raise TypeError("bundle pickled payload must be bytes")
        if not isinstance(self.metadata, BundleMetadata):
            raise TypeError("bundle metadata must be BundleMetadata")


def bundle_digest(bundle: Bundle) -> str:
    """The SHA-256 identity of the whole artifact: the exact pickle and the canonical metadata.

    Each part is length-prefixed (8 bytes, big-endian) after a format marker,
    so no two different artifacts hash alike and a future format cannot reuse
    these digests.
    """
    if not isinstance(bundle, Bundle):
        raise TypeError("bundle_digest requires a Bundle")
    digest = hashlib.sha256(_DIGEST_DOMAIN)
    for part in (bundle.pickled, bundle.metadata.to_json_bytes()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _series(value: str) -> tuple[int, int] | None:
    parts = value.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def validate_bundle_compatibility(metadata: BundleMetadata) -> None:
    """Refuse a bundle made for another Python or benchmax major.minor, before anything is unpickled."""
    if not isinstance(metadata, BundleMetadata):
        raise TypeError("bundle compatibility requires BundleMetadata")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if metadata.python_version != python:
        raise IncompatiblePythonError(
            f"Bundle was packaged with Python {metadata.python_version} but this machine runs Python {python}."
        )
    current = benchmax_version()
    if "unknown" in (metadata.benchmax_version, current):
        raise IncompatibleBenchmaxError(
            "Cannot verify benchmax compatibility because the bundle or runtime version is unknown; "
            "install benchmax as a versioned package."
        )
    bundled, running = _series(metadata.benchmax_version), _series(current)
    if bundled is None or running is None:
        raise IncompatibleBenchmaxError(
            f"Cannot parse benchmax versions (bundle {metadata.benchmax_version}, runtime {current}); "
            "expected major.minor[.patch]."
        )
    if bundled != running:
        raise IncompatibleBenchmaxError(
            f"Bundle was packaged with benchmax {metadata.benchmax_version} but this runtime uses benchmax "
            f"{current}; major.minor versions must match."
        )
