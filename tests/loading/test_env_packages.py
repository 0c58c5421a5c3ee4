"""Installed env packages: found by their ``benchmax.envs`` entry point, listed from metadata alone.

Each test installs distributions the way pip leaves them on disk (a package
directory plus its ``*.dist-info`` with ``METADATA`` and ``entry_points.txt``) in
a directory put on ``sys.path``, so Python's own ``importlib.metadata`` finds them.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from benchmax.envs import EnvSpecError
from benchmax.loading import EnvSpec, installed_envs, load_env

_numbers = itertools.count()

ENV_SOURCE = '''
from benchmax.envs import BaseEnv, JsonlDataset


class {cls}(BaseEnv):
    {docstring}

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{{split}}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        return {{"ok": 1.0}}
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on ``sys.path`` that distributions can be installed into."""
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    before = set(sys.modules)
    yield root
    for name in set(sys.modules) - before:
        sys.modules.pop(name, None)


def install(
    site: Path,
    *,
    dist: str,
    version: str = "1.0.0",
    envs: dict[str, str] | None = None,
    module: str | None = None,
    source: str | None = None,
    summary: str = "",
    docstring: str = '"""Answers questions about capitals."""',
) -> str:
    """Write package ``module`` (an ``env.py`` holding ``Env``) and its dist-info; returns the module name."""
    module = module or f"pkg_{next(_numbers)}"
    package = site / module
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "env.py").write_text(source if source is not None else ENV_SOURCE.format(cls="Env", docstring=docstring))
    (package / "eval.jsonl").write_text('{"prompt_messages": [{"role": "user", "content": "hi"}]}\n')
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n" + (f"Summary: {summary}\n" if summary else "")
    )
    points = envs if envs is not None else {dist: f"{module}.env:Env"}
    (info / "entry_points.txt").write_text(
        "[benchmax.envs]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
    )
    return module


def test_an_installed_env_loads_by_name_with_its_package_directory_as_data_dir(site):
    module = install(site, dist="capitals")

    env, data_dir = load_env("capitals")

    assert type(env).__module__ == f"{module}.env"
    assert data_dir == (site / module).resolve()
    assert EnvSpec("capitals").installed().version == "1.0.0"


def test_listing_reads_the_class_docstring_without_importing_the_env(site):
    marker = site / "imported"
    source = ENV_SOURCE.format(cls="Env", docstring='"""Grades essays with a rubric.\n\n    More text."""')
    install(site, dist="essays", source=f"open({str(marker)!r}, 'w').close()\n" + source, summary="the summary")

    [found] = [env for env in installed_envs() if env.name == "essays"]

    assert (found.distribution, found.version, found.value.endswith(".env:Env")) == ("essays", "1.0.0", True)
    assert found.description() == "Grades essays with a rubric."
    assert not marker.exists(), "listing must not import the env"


def test_the_description_falls_back_to_the_distribution_summary(site):
    install(site, dist="plain", docstring="max_turns = 1", summary="A plain quiz env.")

    [found] = [env for env in installed_envs() if env.name == "plain"]

    assert found.description() == "A plain quiz env."


def test_an_env_whose_import_fails_names_the_entry_point_the_distribution_and_the_line(site):
    module = install(site, dist="broken-env", version="0.4.2", source="import json\nraise RuntimeError('no config')\n")

    with pytest.raises(EnvSpecError) as caught:
        EnvSpec("broken-env").load_class()

    message = str(caught.value)
    assert f"the installed env 'broken-env' ({module}.env:Env from broken-env 0.4.2) failed to load" in message
    assert "RuntimeError: no config" in message
    assert f"{site / module / 'env.py'}:2" in message


def test_an_entry_point_naming_a_missing_module_or_class_says_what_to_fix(site):
    install(site, dist="moved", envs={"moved": "gone_module.env:Env"})
    install(site, dist="renamed", envs={"renamed": "pkg_renamed.env:Missing"}, module="pkg_renamed")

    with pytest.raises(EnvSpecError, match=r"'gone_module.env' is not importable.*reinstall it"):
        EnvSpec("moved").load_class()
    with pytest.raises(EnvSpecError, match="has no attribute 'Missing'; fix the entry point"):
        EnvSpec("renamed").load_class()


def test_a_name_two_distributions_declare_is_refused_naming_both(site):
    install(site, dist="quiz-a", envs={"quiz": "pkg_a.env:Env"}, module="pkg_a")
    install(site, dist="quiz-b", version="2.0", envs={"quiz": "pkg_b.env:Env"}, module="pkg_b")

    with pytest.raises(EnvSpecError) as caught:
        EnvSpec("quiz").load_class()

    message = str(caught.value)
    assert "declared by 2 installed distributions" in message
    assert "quiz-a 1.0.0 (pkg_a.env:Env)" in message and "quiz-b 2.0 (pkg_b.env:Env)" in message
    assert [env.distribution for env in installed_envs() if env.name == "quiz"] == ["quiz-a", "quiz-b"]


def test_a_local_env_directory_with_an_installed_envs_name_is_ambiguous_until_spelled_out(site, tmp_path, monkeypatch):
    module = install(site, dist="shadowed")
    local = tmp_path / "work" / "shadowed"
    local.mkdir(parents=True)
    (local / "env.py").write_text(ENV_SOURCE.format(cls="LocalEnv", docstring='"""local"""'))
    monkeypatch.chdir(tmp_path / "work")

    with pytest.raises(EnvSpecError) as caught:
        EnvSpec("shadowed").load_class()

    assert "names both the directory" in str(caught.value)
    assert f"write ./shadowed for the directory or {module}.env:Env" in str(caught.value)
    assert EnvSpec("./shadowed").load_class().__name__ == "LocalEnv"
    assert EnvSpec(f"{module}.env:Env").load_class().__module__ == f"{module}.env"


def test_a_directory_without_an_env_file_does_not_hide_the_installed_env(site, tmp_path, monkeypatch):
    module = install(site, dist="project")
    (tmp_path / "project" / "src").mkdir(parents=True)  # the package's own source checkout
    monkeypatch.chdir(tmp_path)

    assert EnvSpec("project").load_class().__module__ == f"{module}.env"


def test_an_installed_env_run_from_its_own_directory_is_the_same_env_not_an_ambiguity(site, monkeypatch):
    install(site, dist="here", module="here")
    monkeypatch.chdir(site)  # ./here holds env.py: the very file the entry point names

    spec = EnvSpec("here")

    assert spec.installed() is not None
    assert spec.load_class().__module__ == "here.env"


def test_a_pinned_version_must_match_the_installed_one(site):
    install(site, dist="pinned", version="1.2.0")

    assert EnvSpec("pinned@1.2.0").load_class().__name__ == "Env"
    wanted = r"is version 1.2.0, not 2.0; install that version \(pip install 'pinned==2.0'\)"
    with pytest.raises(EnvSpecError, match=wanted):
        EnvSpec("pinned@2.0").load_class()


def test_an_unknown_name_lists_the_installed_envs(site):
    install(site, dist="known-one")

    with pytest.raises(EnvSpecError) as caught:
        EnvSpec("unknown-one").load_class()

    assert "'unknown-one' is no installed env, directory or importable module" in str(caught.value)
    assert "known-one" in str(caught.value)
