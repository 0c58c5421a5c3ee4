"""benchmax.compat's table against the recorded 0.2.5 surface, and the modules it serves against their homes.

Each 0.2.x module path is either a file here or served from the table; no file beside a real
module re-exports 0.2.x names any more, and a served name is the very object at its home.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import pickle
import sys

import pytest
from test_name_surface import SURFACE

from benchmax.compat import MODULES, resolve

SERVED = sorted(path for path, old in MODULES.items() if old.names)


def test_the_table_holds_every_0_2_5_module_and_name():
    missing = {
        module: sorted(set(names) - set(MODULES[module].public)) if module in MODULES else "the module"
        for module, names in SURFACE.items()
        if module not in MODULES or not set(names) <= set(MODULES[module].public)
    }
    assert not missing, f"benchmax.compat.MODULES lacks {missing}"


@pytest.mark.parametrize("path", sorted(MODULES))
def test_a_0_2_x_path_is_a_file_or_served_never_both(path):
    parent = path.rpartition(".")[0]
    search = getattr(importlib.import_module(parent), "__path__", None)
    spec = importlib.machinery.PathFinder.find_spec(path, search)
    if MODULES[path].names:
        assert spec is None, f"{spec.origin} would shadow the table's {path}: delete it, the table serves it"
        assert set(MODULES[path].public) <= set(MODULES[path].names)
    else:
        assert spec is not None, f"{path} has no file here: give its names homes in the table"


@pytest.mark.parametrize("path", SERVED)
def test_a_served_module_gives_each_name_the_object_at_its_home(path):
    module = importlib.import_module(path)
    assert module.__all__ == list(MODULES[path].public)
    refused = set()
    for name, home in MODULES[path].names.items():
        try:
            expected = resolve(home, name)
        except ImportError as exc:  # a Harbor class without Harbor (Python 3.11): the same refusal
            with pytest.raises(ImportError, match=str(exc)[:40]):
                getattr(module, name)
            refused.add(name)
            continue
        assert getattr(module, name) is expected, f"{path}.{name} is not {home}"
    with pytest.raises(AttributeError, match="has no attribute 'nonexistent'"):
        module.nonexistent  # noqa: B018
    if refused & set(MODULES[path].public):
        return  # ``import *`` stops at the refused name, as it does at its home
    namespace: dict[str, object] = {}
    exec(f"from {path} import *", namespace)
    assert set(MODULES[path].public) == set(namespace) - {"__builtins__"}


def test_served_classes_keep_identity_and_pickle_by_their_home():
    import benchmax.harbor
    import benchmax.rewards
    import benchmax.sft
    from benchmax.envs.harbor.env import HarborEnv
    from benchmax.rewards.judge import Judge
    from benchmax.sft.issues import SftIssue

    assert HarborEnv is benchmax.harbor.HarborEnv
    assert Judge is benchmax.rewards.Judge
    issue = SftIssue(message="not a message", location="$.messages[0]", line=3)
    assert isinstance(issue, benchmax.sft.SftIssue)
    assert pickle.loads(pickle.dumps(issue)) == issue
    assert pickle.loads(pickle.dumps(HarborEnv)) is HarborEnv


def test_a_served_package_serves_its_submodules():
    harbor = importlib.import_module("benchmax.envs.harbor")
    assert harbor.__path__ == []
    env = importlib.import_module("benchmax.envs.harbor.env")
    assert sys.modules["benchmax.envs.harbor.env"] is env
    assert harbor.env is env
