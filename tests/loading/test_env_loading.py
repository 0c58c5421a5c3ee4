"""Env specs: ``file.py:Class``, ``package.module:Class`` and a directory holding ``env.py``."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from benchmax.envs import EnvSpecError
from benchmax.loading import EnvSpec

ENV_CLASS = """
class {name}(BaseEnv):
    max_turns = 1

    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([{{"prompt_messages": [{{"role": "user", "content": "hi"}}]}}])

    async def compute_reward(self, rollout):
        return {{"{component}": 1.0}}
"""
HEADER = "from benchmax.envs import BaseEnv, ListDataset\n"


def _env_source(*names: str, component: str = "one") -> str:
    return HEADER + "".join(ENV_CLASS.format(name=name, component=component) for name in names)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_and_class_spec_loads_that_class_with_its_kwargs(tmp_path):
    env_file = _write(tmp_path / "my_env.py", _env_source("FirstEnv", "SecondEnv"))

    env = EnvSpec(f"{env_file}:SecondEnv", {"level": 3, "tags": ["a"]}).load()

    assert type(env).__name__ == "SecondEnv"
    assert env.kwargs == {"level": 3, "tags": ["a"]}
    assert EnvSpec(f"{env_file}:SecondEnv").directory == tmp_path.resolve()


def test_a_module_and_class_spec_imports_the_module(tmp_path, monkeypatch):
    package = f"envspec_pkg_{uuid.uuid4().hex[:8]}"
    _write(tmp_path / package / "__init__.py", "")
    _write(tmp_path / package / "envs.py", _env_source("ModuleEnv"))
    monkeypatch.syspath_prepend(str(tmp_path))

    spec = EnvSpec(f"{package}.envs:ModuleEnv")

    assert spec.load_class().__module__ == f"{package}.envs"
    assert spec.directory is None


def test_a_directory_spec_loads_the_one_class_in_its_env_py(tmp_path):
    _write(tmp_path / "task" / "env.py", _env_source("OnlyEnv"))

    spec = EnvSpec(str(tmp_path / "task"))

    assert spec.load_class().__name__ == "OnlyEnv"
    assert spec.directory == (tmp_path / "task").resolve()


def test_a_directory_without_an_env_class_is_an_error(tmp_path):
    _write(tmp_path / "task" / "env.py", HEADER + "HELPER = 1\n")

    with pytest.raises(
        EnvSpecError, match=r"expected exactly one environment class, found none; name it as FILE:Class"
    ):
        EnvSpec(str(tmp_path / "task")).load_class()


def test_a_directory_with_two_env_classes_names_both(tmp_path):
    _write(tmp_path / "task" / "env.py", _env_source("BetaEnv", "AlphaEnv"))

    with pytest.raises(EnvSpecError, match=r"found AlphaEnv, BetaEnv; name it as FILE:Class"):
        EnvSpec(str(tmp_path / "task")).load_class()


def test_a_directory_without_env_py_names_the_missing_file(tmp_path):
    (tmp_path / "empty").mkdir()

    with pytest.raises(EnvSpecError, match=r"empty/env\.py: env file not found"):
        EnvSpec(str(tmp_path / "empty")).load_class()


def test_a_class_name_the_file_lacks_is_an_error(tmp_path):
    env_file = _write(tmp_path / "my_env.py", _env_source("FirstEnv"))

    with pytest.raises(EnvSpecError, match=r"my_env:Missing is not an environment class"):
        EnvSpec(f"{env_file}:Missing").load_class()


def test_an_unimportable_module_says_which_spec_forms_exist():
    with pytest.raises(EnvSpecError, match=r"cannot import 'no_such_benchmax_module'.*package\.module:Class"):
        EnvSpec("no_such_benchmax_module:Env").load_class()


def test_an_import_error_names_the_file_and_line(tmp_path):
    env_file = _write(tmp_path / "broken.py", HEADER + "\nimport no_such_module_for_benchmax_tests\n")

    with pytest.raises(EnvSpecError, match=rf"{env_file}:3: importing it raised ModuleNotFoundError"):
        EnvSpec(f"{env_file}:Env").load_class()


def test_a_module_an_extra_installs_names_the_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)  # as on an install without the openai extra
    env_file = _write(tmp_path / "agent_env.py", HEADER + "\nimport httpx\n")

    with pytest.raises(EnvSpecError) as raised:
        EnvSpec(f"{env_file}:Env").load_class()

    assert f"{env_file}:3: importing it raised ModuleNotFoundError" in str(raised.value)
    assert "it comes with benchmax's 'openai' extra: pip install 'benchmax[openai]'" in str(raised.value)


def test_a_syntax_error_names_the_file_and_line(tmp_path):
    env_file = _write(tmp_path / "broken.py", HEADER + "def oops(:\n")

    with pytest.raises(EnvSpecError, match=rf"{env_file}:2: importing it raised SyntaxError"):
        EnvSpec(str(env_file)).load_class()


def test_unknown_constructor_kwargs_are_reported_with_the_class(tmp_path):
    env_file = _write(
        tmp_path / "my_env.py",
        _env_source("StrictEnv")
        .replace("**kwargs", "*, level=1")
        .replace("self.kwargs = kwargs", "self.level = level"),
    )

    with pytest.raises(EnvSpecError, match=r"cannot construct StrictEnv\(\*\*\{'colour': 'red'\}\)"):
        EnvSpec(f"{env_file}:StrictEnv", {"colour": "red"}).load()


async def test_an_edited_env_file_is_loaded_again_in_the_same_process(tmp_path):
    env_file = _write(tmp_path / "my_env.py", _env_source("EditedEnv", component="before"))
    first = EnvSpec(str(env_file)).load()
    _write(env_file, _env_source("EditedEnv", component="after_the_edit"))

    second = EnvSpec(str(env_file)).load()

    assert await first.compute_reward(None) == {"before": 1.0}
    assert await second.compute_reward(None) == {"after_the_edit": 1.0}
    assert EnvSpec(str(env_file)).load_class() is type(second), "an unchanged file is not imported again"


def test_an_env_file_loads_under_a_readable_name_that_is_the_same_in_every_process(tmp_path):
    import subprocess
    import sys

    _write(tmp_path / "sql" / "env.py", _env_source("SqlEnv"))
    code = (
        "import sys; from benchmax.loading import EnvSpec; "
        f"cls = EnvSpec({str(tmp_path / 'sql')!r}).load_class(); print(cls.__module__ + '.' + cls.__qualname__)"
    )
    names = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        for _ in range(2)
    }
    assert names == {"sql.env.SqlEnv"}


def test_two_env_files_with_the_same_directory_name_get_distinct_module_names(tmp_path):
    _write(tmp_path / "a" / "task" / "env.py", _env_source("FirstEnv"))
    _write(tmp_path / "b" / "task" / "env.py", _env_source("SecondEnv"))
    first = EnvSpec(str(tmp_path / "a" / "task")).load_class()
    second = EnvSpec(str(tmp_path / "b" / "task")).load_class()
    assert first.__module__ != second.__module__
    assert first.__module__.startswith("task.env") and second.__module__.startswith("task.env")


def test_a_directory_of_a_0_2_example_loads_its_main_py(tmp_path):
    _write(tmp_path / "math" / "main.py", _env_source("MathEnv"))
    assert EnvSpec(str(tmp_path / "math")).load_class().__name__ == "MathEnv"
