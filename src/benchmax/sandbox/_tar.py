"""Tar streams in and out of sandboxes; what comes out is untrusted."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from benchmax.sandbox._errors import SandboxError


def tar_directory(root: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as archive:
        for entry in sorted(root.iterdir()):
            archive.add(str(entry), arcname=entry.name)
    return buffer.getvalue()


def untar(archive: bytes, destination: Path, source: str) -> None:
    """Unpack what a sandbox sent: its names and links are untrusted, so nothing may land outside."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        members = tar.getmembers()
        single_file = len(members) == 1 and members[0].isfile() and members[0].name == Path(source).name
        if single_file:
            destination.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(members[0])
            assert extracted is not None
            destination.write_bytes(extracted.read())
            return
        destination.mkdir(parents=True, exist_ok=True)
        if hasattr(tarfile, "data_filter"):
            try:
                tar.extractall(destination, filter="data")
            except tarfile.FilterError as exc:
                raise SandboxError(f"refusing what the sandbox sent from {source}: {exc}") from exc
            return
        for member in members:
            parts = Path(member.name).parts
            if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
                raise SandboxError(
                    f"refusing {member.name!r} from sandbox (links and special files are not copied out)"
                )
        tar.extractall(destination)
