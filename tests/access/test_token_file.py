"""The token file: created under directories checked through their descriptors, never through a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from benchmax.access import AccessError, private_token_file

TOKEN = "t0ken-for-tests-0123456789"


def test_the_file_and_its_directories_are_this_users_alone_and_go_when_removed(tmp_path: Path) -> None:
    path = tmp_path / "benchmax" / "serve" / "8000.token"
    with private_token_file(path, TOKEN, below=tmp_path):
        assert path.read_text() == TOKEN + "\n"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert {stat.S_IMODE(p.stat().st_mode) for p in (path.parent, path.parent.parent)} == {0o700}
        assert [p.name for p in path.parent.iterdir()] == ["8000.token"]  # no staged file left behind
    assert not path.exists()


def test_a_symlink_planted_at_the_token_name_is_replaced_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "run" / "serve").mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "run", 0o700)
    path = tmp_path / "run" / "serve" / "8000.token"
    path.symlink_to(victim)
    with private_token_file(path, TOKEN, below=tmp_path):
        assert not path.is_symlink() and path.read_text() == TOKEN + "\n"
    assert victim.read_text() == "precious\n"


def test_a_newer_servers_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "run" / "serve" / "8000.token"
    older = private_token_file(path, TOKEN, below=tmp_path)
    with private_token_file(path, "a-newer-token-abcdef", below=tmp_path):
        older.remove()
        assert path.read_text() == "a-newer-token-abcdef\n"


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o1777])
def test_a_directory_open_to_other_users_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    (tmp_path / "run" / "serve").mkdir(parents=True)
    os.chmod(tmp_path / "run", 0o700)
    os.chmod(tmp_path / "run" / "serve", mode)
    with pytest.raises(AccessError, match=rf"mode {mode:04o}, open to other users; make it private \(chmod 700"):
        private_token_file(tmp_path / "run" / "serve" / "8000.token", TOKEN, below=tmp_path)
    assert list((tmp_path / "run" / "serve").iterdir()) == []


def test_a_directory_others_may_only_read_is_made_private(tmp_path: Path) -> None:
    (tmp_path / "run" / "serve").mkdir(parents=True)
    os.chmod(tmp_path / "run", 0o755)  # a shared cache folder: fine, nobody else can write in it
    os.chmod(tmp_path / "run" / "serve", 0o755)
    with private_token_file(tmp_path / "run" / "serve" / "8000.token", TOKEN, below=tmp_path):
        assert stat.S_IMODE((tmp_path / "run" / "serve").stat().st_mode) == 0o700


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "run").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(AccessError, match="a symlink is refused"):
        private_token_file(tmp_path / "run" / "serve" / "8000.token", TOKEN, below=tmp_path)
    assert list(elsewhere.iterdir()) == []
