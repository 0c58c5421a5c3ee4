"""Env bundles: made from a real project on disk, loaded back in a fresh interpreter without it."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import cloudpickle
import pytest

from benchmax.bundle import (
    Bundle,
    BundleMetadata,
    BundlingError,
    IncompatibleBenchmaxError,
    IncompatiblePythonError,
    bundle_digest,
    dump_bundle,
    load_bundle,
    unregistered_local_refs,
    validate_bundle_compatibility,
)
from benchmax.envs import BaseEnv

SRC = Path(__file__).resolve().parents[2] / "src"


def benchmax_version() -> str:
    return importlib.metadata.version("benchmax")


ENV_MODULE = """
from benchmax.envs import BaseEnv, ListDataset
from {package} import grading


class GradedEnv(BaseEnv):
    max_turns = 1

    def __init__(self, bonus: float = 0.0) -> None:
        super().__init__()
        self.bonus = bonus

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return ListDataset([])

    async def compute_reward(self, rollout):
        return {{"score": grading.score(rollout) + self.bonus}}


class LateImportEnv(GradedEnv):
    async def compute_reward(self, rollout):
        from {package} import grading as late

        return {{"score": late.score(rollout)}}


class DynamicImportEnv(GradedEnv):
    async def compute_reward(self, rollout):
        import importlib

        return {{"score": importlib.import_module("{package}.grading").score(rollout)}}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory (with pyproject.toml) holding an env module and a helper it imports."""
    root = tmp_path / "myproject"
    package = f"bundled_pkg_{tmp_path.name.replace('-', '_')}"
    (root / package).mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "myproject"\nversion = "0"\n')
    (root / package / "__init__.py").write_text("")
    (root / package / "grading.py").write_text("def score(rollout):\n    return 1.0\n")
    (root / package / "env.py").write_text(ENV_MODULE.format(package=package))
    monkeypatch.syspath_prepend(str(root))
    module = importlib.import_module(f"{package}.env")
    yield module
    for name in [name for name in sys.modules if name.startswith(package)]:
        del sys.modules[name]


def load_elsewhere(bundle: Bundle, tmp_path: Path) -> str:
    """Load ``bundle`` in a new interpreter that cannot import the project, and score once."""
    (tmp_path / "bundle.bin").write_bytes(bundle.pickled)
    (tmp_path / "meta.json").write_bytes(bundle.metadata.to_json_bytes())
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from benchmax.bundle import Bundle, BundleMetadata, load_bundle
        here = Path({str(tmp_path)!r})
        metadata = BundleMetadata.from_json_bytes(here.joinpath("meta.json").read_bytes())
        env = load_bundle(Bundle(here.joinpath("bundle.bin").read_bytes(), metadata))
        leaked = any("bundled_pkg" in m for m in sys.modules)
        print(type(env).__name__, env.bonus, asyncio.run(env.compute_reward(None)), leaked)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_an_env_and_its_project_source_load_where_the_project_is_absent(project, tmp_path, caplog):
    bundle = dump_bundle(project.GradedEnv, constructor_args={"bonus": 0.5}, pip_dependencies=["NumPy>=1.26"])
    assert "auto-bundling local module(s)" in caplog.text
    assert load_elsewhere(bundle, tmp_path) == "GradedEnv 0.5 {'score': 1.5} False"
    metadata = bundle.metadata
    assert metadata.pip_dependencies == ("numpy>=1.26",)
    assert metadata.python_version == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert metadata.benchmax_version == benchmax_version()
    assert metadata.env_class_source.startswith("class GradedEnv(BaseEnv):")


def test_without_auto_capture_the_missing_modules_are_named(project):
    with pytest.raises(BundlingError, match=r"GradedEnv: missing local_modules=\[bundled_pkg_.*\.env\]"):
        dump_bundle(project.GradedEnv, auto_local_modules=False)
    grading = sys.modules[project.__name__.replace(".env", ".grading")]
    bundle = dump_bundle(project.GradedEnv, local_modules=[project, grading], auto_local_modules=False)
    assert unregistered_local_refs(bundle.pickled) == []
    assert unregistered_local_refs(cloudpickle.dumps(project.GradedEnv)) == [project.__name__]


def test_imports_inside_methods_are_refused_because_they_run_only_where_the_bundle_loads(project):
    for env in (project.LateImportEnv, project.DynamicImportEnv):
        with pytest.raises(BundlingError, match="delayed import of local source cannot be captured safely"):
            dump_bundle(env)


def test_source_outside_the_project_needs_an_owner(tmp_path, monkeypatch):
    elsewhere = tmp_path / "loose"
    elsewhere.mkdir()
    (elsewhere / "loose_helpers_for_bundle.py").write_text("def score():\n    return 2.0\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    helpers = importlib.import_module("loose_helpers_for_bundle")
    try:
        namespace: dict = {"BaseEnv": BaseEnv, "helpers": helpers}
        exec(
            textwrap.dedent(
                """
                class LooseEnv(BaseEnv):
                    max_turns = 1
                    async def create_dataset(self, split, base_dir, *, max_examples=None):
                        return []
                    async def compute_reward(self, rollout):
                        return {"score": helpers.score()}
                """
            ),
            namespace,
        )
        env_class = namespace["LooseEnv"]
        with pytest.raises(BundlingError, match="referenced source outside the environment project: loose_helpers"):
            dump_bundle(env_class, env_class_source="class LooseEnv: ...")
        bundle = dump_bundle(env_class, local_modules=[helpers], env_class_source="class LooseEnv: ...")
        assert bundle.metadata.env_class_source == "class LooseEnv: ..."
    finally:
        sys.modules.pop("loose_helpers_for_bundle", None)


def test_only_concrete_environments_bundle():
    with pytest.raises(BundlingError, match="does not implement Environment"):
        dump_bundle(dict)  # type: ignore[arg-type]
    with pytest.raises(BundlingError, match="unimplemented abstract methods: create_dataset"):
        dump_bundle(BaseEnv)
    with pytest.raises(BundlingError, match="Invalid pip_dependencies"):
        dump_bundle(_TinyEnv, pip_dependencies=["numpy", "NumPy>=2"])


class _TinyEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return []

    async def compute_reward(self, rollout):
        return {"ok": 1.0}


def test_dependencies_are_canonical_and_order_free():
    metadata = BundleMetadata(
        pip_dependencies=[
            "Requests[Socks,security]>=2,<3",
            "numpy==2.*; python_version >= '3.11'",
            "pkg @ https://x/p.whl",
        ],
        python_version="3.11",
        benchmax_version="0.3.0",
        env_class_source=None,
    )
    assert metadata.pip_dependencies == (
        'numpy==2.*; python_version >= "3.11"',
        "pkg @ https://x/p.whl",
        "requests[security,socks]<3,>=2",
    )
    for bad, why in [
        (["numpy", "numpy>1"], "declared more than once"),
        (["not a req!"], "not valid PEP 508"),
        ("numpy", "sequence"),
    ]:
        with pytest.raises((TypeError, ValueError), match=why):
            BundleMetadata(pip_dependencies=bad, python_version="3.11", benchmax_version="0", env_class_source=None)


def test_metadata_round_trips_and_rejects_what_it_does_not_know():
    metadata = BundleMetadata(("a>=1",), "3.11", "0.3.0", "class X: ...")
    assert BundleMetadata.from_json_bytes(metadata.to_json_bytes()) == metadata
    assert metadata.to_json_bytes() == (
        b'{"benchmax_version":"0.3.0","env_class_source":"class X: ...",'
        b'"pip_dependencies":["a>=1"],"python_version":"3.11"}'
    )
    for data, why in [
        (b"[]", "must be a JSON object"),
        (b"\xff", "UTF-8 JSON object"),
        (b'{"pip_dependencies": [], "python_version": "3.11", "benchmax_version": "0", "x": 1}', "unsupported keys"),
        (b'{"pip_dependencies": [], "python_version": "3.11"}', "missing 'benchmax_version'"),
    ]:
        with pytest.raises(ValueError, match=why):
            BundleMetadata.from_json_bytes(data)


def test_the_digest_covers_the_pickle_and_the_metadata():
    metadata = BundleMetadata((), "3.11", "0.3.0", None)
    digest = bundle_digest(Bundle(b"payload", metadata))
    assert digest == bundle_digest(Bundle(b"payload", BundleMetadata((), "3.11", "0.3.0", None)))
    assert digest != bundle_digest(Bundle(b"payloaf", metadata))
    assert digest != bundle_digest(Bundle(b"payload", BundleMetadata(("a",), "3.11", "0.3.0", None)))
    assert len(digest) == 64
    with pytest.raises(TypeError):
        Bundle("text", metadata)  # type: ignore[arg-type]


def test_a_bundle_for_another_python_or_benchmax_is_refused_before_unpickling():
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    never_unpickled = b"not a pickle"
    with pytest.raises(IncompatiblePythonError, match=r"packaged with Python 2\.7"):
        load_bundle(Bundle(never_unpickled, BundleMetadata((), "2.7", benchmax_version(), None)))
    with pytest.raises(IncompatibleBenchmaxError, match=r"major\.minor versions must match"):
        validate_bundle_compatibility(BundleMetadata((), here, "99.1.0", None))
    with pytest.raises(IncompatibleBenchmaxError, match="unknown"):
        validate_bundle_compatibility(BundleMetadata((), here, "unknown", None))
    with pytest.raises(IncompatibleBenchmaxError, match="Cannot parse"):
        validate_bundle_compatibility(BundleMetadata((), here, "dev", None))


def test_a_corrupt_or_foreign_payload_is_a_bundling_error():
    metadata = BundleMetadata((), f"{sys.version_info.major}.{sys.version_info.minor}", benchmax_version(), None)
    for payload, why in [
        (b"garbage", "Failed to unpickle"),
        (cloudpickle.dumps([1, 2]), "expected \\(env_class, constructor_args\\)"),
        (cloudpickle.dumps((dict, {})), "not an Environment"),
        (cloudpickle.dumps((_TinyEnv, [])), "constructor_args is list"),
    ]:
        with pytest.raises(BundlingError, match=why):
            load_bundle(Bundle(payload, metadata))
    env_class, args = load_bundle(dump_bundle(_TinyEnv), instantiate=False)
    assert (env_class.__name__, args) == ("_TinyEnv", {})


def test_a_rag_env_bundles_with_its_search_client_and_judge_settings(tmp_path):
    from benchmax.auth import InjectedAuth
    from benchmax.rag import RagEnv

    namespace: dict = {"RagEnv": RagEnv}
    exec(
        textwrap.dedent(
            """
            class Corpus:
                available_modes = ["lexical"]
                async def search(self, query, mode="auto", top_k=10):
                    return [{"content": "Paris is in France.", "source": "fr.md", "metadata": {}, "score": 1.0}]

            class AtlasEnv(RagEnv):
                def __init__(self, judge_base_url):
                    super().__init__(Corpus(), judge_base_url=judge_base_url, judge_model="judge")
            """
        ),
        namespace,
    )
    bundle = dump_bundle(
        namespace["AtlasEnv"], constructor_args={"judge_base_url": "http://judge/v1"}, env_class_source="class AtlasEnv"
    )
    env = load_bundle(bundle)
    assert isinstance(env, RagEnv) and env._judge.auth == InjectedAuth("judge")
    assert env._judge.base_url == "http://judge/v1"
