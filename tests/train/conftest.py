"""A tiny policy built in the test from :mod:`benchmax.train.tiny`: no hub, no download.

The vocabulary is a few dozen words, so a random model emits ``<tool_call>`` and
the end-of-turn token often: rollouts are short and many of them call tools,
which is what these tests need. Here the model carries no built-in bias; tests
that want tool calls pass ``tool_bias`` to ``generate`` themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from benchmax.train.tiny import build_tiny_model, tiny_model, tiny_tokenizer

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2's template: history is rendered from ``content`` only, so a re-render
drops the tool-call text the model generated, the trap the trainer must avoid."""


@pytest.fixture
def tiny() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    tokenizer = tiny_tokenizer(CHAT_TEMPLATE)
    return tiny_model(tokenizer, bias=0), tokenizer


@pytest.fixture
def tiny_model_dir(tmp_path: Path) -> Path:
    torch.set_num_threads(1)
    return build_tiny_model(tmp_path / "tiny-model", bias=0, chat_template=CHAT_TEMPLATE)


@pytest.fixture
def tool_bias(tiny: tuple[Any, Any]) -> dict[tuple[int, ...], float]:
    """``generate`` biases that make the random policy end turns and call tools often."""
    tokenizer = tiny[1]
    return {
        (tokenizer.eos_token_id,): 2.5,
        (tokenizer.convert_tokens_to_ids("<tool_call>"),): 2.5,
    }
