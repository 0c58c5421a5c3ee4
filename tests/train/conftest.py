"""A tiny policy built in the test: a tokenizer trained here and a random Qwen2.

No hub, no download. The vocabulary is a few dozen words, so a random model
emits ``<tool_call>`` and the end-of-turn token often: rollouts are short and
many of them call tools, which is what these tests need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2's template: history is rendered from ``content`` only, so a re-render
drops the tool-call text the model generated, the trap the trainer must avoid."""

WORDS = [
    *"what is two plus three add result five seven done answer".split(),  # noqa: SIM905
    *"yes no the a number sum of".split(),  # noqa: SIM905
]
CORPUS = [
    "what is two plus three",
    "add two three result five",
    "the answer is five",
    "done yes no seven number sum of a",
    "<tool_call> add </tool_call>",
    *[str(digit) for digit in range(10)],
]


def make_tokenizer() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|im_start|>", "<|im_end|>"])
    tokenizer.train_from_iterator(CORPUS + WORDS + ["user", "assistant", "tool", "system"], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        bos_token="<|im_start|>",
    )
    fast.add_tokens(["<tool_call>", "</tool_call>"])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


@pytest.fixture
def tiny() -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    torch.set_num_threads(1)
    tokenizer = make_tokenizer()
    return make_model(tokenizer), tokenizer


@pytest.fixture
def tiny_model_dir(tmp_path: Path, tiny: tuple[Any, Any]) -> Path:
    model, tokenizer = tiny
    directory = tmp_path / "tiny-model"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture
def tool_bias(tiny: tuple[Any, PreTrainedTokenizerFast]) -> dict[tuple[int, ...], float]:
    """``generate`` biases that make the random policy end turns and call tools often."""
    tokenizer = tiny[1]
    return {
        (tokenizer.eos_token_id,): 2.5,
        (tokenizer.convert_tokens_to_ids("<tool_call>"),): 2.5,
    }

