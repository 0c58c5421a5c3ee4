"""A token in a file only this user can read, created so no other user can redirect or read it.

The file's directory may sit under a parent another user can write (``XDG_RUNTIME_DIR``
kept across ``su`` or ``sudo -E``, a shared cache): there a planted symlink or a
directory of theirs would receive the token, or make this process overwrite any file.
So every directory below the parent is opened without following symlinks and checked
through the descriptor itself (a directory this user owns that nobody else can write; the
file's own directory is made 0700), and the file is created under that descriptor with ``O_CREAT|O_EXCL|O_NOFOLLOW``
at a random staged name, then renamed into place (a rename replaces a symlink, never
writes through it). Anything else is refused with what to fix.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from types import TracebackType

from benchmax.access._listen import AccessError

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TokenFile:
    """The token file while a server runs; :meth:`remove` deletes it unless a newer server replaced it."""

    def __init__(self, path: Path, token: str, directory: int) -> None:
        self.path = path
        self._token = token
        self._directory: int | None = directory

    def remove(self) -> None:
        directory, self._directory = self._directory, None
        if directory is None:
            return
        try:
            with contextlib.suppress(OSError):
                fd = os.open(self.path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
                with os.fdopen(fd, "rb") as handle:
                    ours = handle.read(4096).decode("utf-8", "replace").strip() == self._token
                if ours:
                    os.unlink(self.path.name, dir_fd=directory)
        finally:
            os.close(directory)

    def __enter__(self) -> TokenFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.remove()


def private_token_file(path: Path, token: str, *, below: Path) -> TokenFile:
    """Write ``token`` to ``path`` (0600), creating each directory under ``below`` (the shared
    parent, e.g. ``XDG_RUNTIME_DIR``) as 0700; an :class:`AccessError` when one of them is a
    symlink or not this user's alone."""
    path = Path(path)
    base = Path(below)
    relative = path.parent.relative_to(base).parts
    try:
        directory = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise AccessError(f"cannot open {base} for the token file ({exc.strerror})") from exc
    try:
        walked = base
        for name in relative:
            walked = walked / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=directory)
            try:
                child = os.open(name, _DIRECTORY, dir_fd=directory)
            except OSError as exc:
                raise AccessError(
                    f"refusing to write the token file: {walked} is not a directory of this user's "
                    f"({exc.strerror}; a symlink is refused); remove it and start again"
                ) from exc
            os.close(directory)
            directory = child
            _check_private(directory, walked, last=name == relative[-1])
        staged = f".{path.name}.{secrets.token_hex(8)}"
        exclusive = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(staged, exclusive, 0o600, dir_fd=directory)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(token + "\n")
            os.replace(staged, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(staged, dir_fd=directory)
            raise
    except BaseException:
        os.close(directory)
        raise
    return TokenFile(path, token, directory)


def _check_private(directory: int, path: Path, *, last: bool) -> None:
    """This user's, and writable by nobody else (nothing can be planted in it); the file's own
    directory is made 0700 too (nobody else lists it)."""
    info = os.fstat(directory)
    if info.st_uid != os.geteuid():
        raise AccessError(
            f"refusing to write the token file: {path} belongs to uid {info.st_uid}, not to this user "
            f"(uid {os.geteuid()}); another user could read the token. Set XDG_RUNTIME_DIR to a directory of "
            "your own (log in with `su -` rather than `su`, or drop `sudo -E`), or remove it"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise AccessError(
            f"refusing to write the token file: {path} has mode {mode:04o}, open to other users; "
            f"make it private (chmod 700 {path}) or remove it"
        )
    if last and mode & 0o077:
        os.fchmod(directory, 0o700)
