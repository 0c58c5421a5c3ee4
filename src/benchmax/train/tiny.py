"""A tiny random chat model for smoke-testing an env in training, built locally.

``benchmax train`` needs a policy; downloading one to check that an env trains
at all is slow and needs a network. :func:`build_tiny_model` writes a
two-layer random Llama (about 20k parameters) and a word-level tokenizer with
a tool-aware chat template into a directory, in well under a second and with no
hub access, so ``benchmax train ENV --model DIR`` runs every part of a training
step (rollouts through the engine, tools, rewards, the GRPO update, the run
store) in seconds on a CPU. What it learns is noise: it tests plumbing, never
quality.

The vocabulary is a few dozen words plus the chat and tool-call markers, and the
saved generation config biases the end-of-turn and ``<tool_call>`` tokens, so a
random policy ends its turns and calls tools often: rollouts are short and many
are multi-turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{ '<|im_start|>system\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\n\n' }}{%- endif %}"
    "{{ '# Tools\n\nCall a tool with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.\n<tools>' }}"
    "{%- for tool in tools %}{{ '\n' + (tool | tojson) }}{%- endfor %}"
    "{{ '\n</tools><|im_end|>\n' }}"
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' and loop.first %}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{ '<|im_start|>user' }}{%- endif %}"
    "{{ '\n<tool_response>\n' + message['content'] + '\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{ '<|im_end|>\n' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' + message['content'] }}"
    "{%- for call in message.get('tool_calls') or [] %}"
    "{{ '\n<tool_call>\n{\"name\": ' + (call['function']['name'] | tojson) + ', \"arguments\": ' }}"
    "{{ (call['function']['arguments'] | tojson) + '}\n</tool_call>' }}"
    "{%- endfor %}"
    "{{ '<|im_end|>\n' }}"
    "{%- else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{%- endif %}"
)
"""A Qwen2.5/Hermes-style template: tools as JSON in the system turn, calls as
``<tool_call>`` JSON, consecutive tool results in one ``user`` turn. It renders
history the same way however many messages follow, so the trainer can append
tool results token-faithfully."""

SPECIAL_TOKENS = ("[UNK]", "<|im_start|>", "<|im_end|>")
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

_WORDS = (
    *("what", "is", "two", "plus", "three", "add", "result", "five", "seven", "done", "answer"),
    *("yes", "no", "the", "a", "number", "sum", "of", "name", "arguments"),
    *("user", "assistant", "tool", "system"),
)
_CORPUS = (
    "what is two plus three",
    "add two three result five",
    "the answer is five",
    "done yes no seven number sum of a",
    "<tool_call> add </tool_call>",
    *(str(digit) for digit in range(10)),
)

DEFAULT_BIAS = 2.5
"""Logit bias on end-of-turn and ``<tool_call>``; 0 leaves the random policy alone.

The policy reports the model's own logprobs, not the biased sampling
distribution's, so a biased run is slightly off-policy: harmless when checking
plumbing, which is all this model is for."""


def call_token(call: Mapping[str, Any]) -> str:
    """The single token for a whole tool call: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``."""
    body = {"name": call["name"], "arguments": call.get("arguments", {})}
    return f"<tool_call>{orjson.dumps(body).decode()}</tool_call>"


def tiny_tokenizer(chat_template: str = CHAT_TEMPLATE, *, calls: Sequence[Mapping[str, Any]] = ()) -> Any:
    """A word-level tokenizer trained here (unknown words become ``[UNK]``).

    End-of-sequence and padding are ``<|im_end|>``; the tool-call and tool-result
    tags are single tokens, as in real tool-calling models. Each of ``calls``
    (``{"name": ..., "arguments": {...}}``) becomes one more token holding the
    whole call, so a random policy can emit valid calls and the env's tools run.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS))
    tokenizer.train_from_iterator([*_CORPUS, *_WORDS], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        bos_token="<|im_start|>",
    )
    fast.add_tokens([*TOOL_TOKENS, *(call_token(call) for call in calls)])
    fast.chat_template = chat_template
    return fast


def tiny_model(
    tokenizer: Any,
    *,
    seed: int = 0,
    bias: float = DEFAULT_BIAS,
    context: int = 4096,
    head_dim: int | None = None,
) -> Any:
    """A random two-layer Llama over ``tokenizer``'s vocabulary, deterministic in ``seed``.

    Llama, not Qwen2: transformers 5 loads the tokenizer of a saved ``qwen2``
    directory as its own byte-level ``Qwen2Tokenizer`` whatever was saved, so the
    word-level tokenizer would not survive ``save_pretrained``/``from_pretrained``.

    ``bias`` goes into the generation config as a ``sequence_bias`` on end-of-turn,
    ``<tool_call>`` and every whole-call token, so it is saved with the model and
    every ``generate`` (the trainer's policy included) applies it. ``context`` is
    the longest prompt plus completion the policy accepts: tool schemas in the
    system turn take a few hundred of these word-level tokens. ``head_dim``
    defaults to 8; vLLM's CPU attention needs 32 or more.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim or 8,
        max_position_embeddings=context,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if bias:
        model.generation_config.sequence_bias = [[[token], float(bias)] for token in favoured_tokens(tokenizer)]
    return model


def favoured_tokens(tokenizer: Any) -> tuple[int, ...]:
    """End-of-turn, ``<tool_call>`` and every whole-call token: the ids a bias
    pushes so a random policy ends turns and calls tools often."""
    calls = [token for token in tokenizer.get_added_vocab() if token.startswith("<tool_call>{")]
    return (tokenizer.eos_token_id, *tokenizer.convert_tokens_to_ids(["<tool_call>", *calls]))


def build_tiny_model(
    directory: str | Path,
    *,
    seed: int = 0,
    bias: float = DEFAULT_BIAS,
    calls: Sequence[Mapping[str, Any]] = (),
    chat_template: str = CHAT_TEMPLATE,
    head_dim: int | None = None,
) -> Path:
    """Write a tiny random model and its tokenizer to ``directory``; return the path.

    The directory loads with ``from_pretrained`` like any transformers model, so
    ``benchmax train ENV --model DIR`` and ``train(env, model=str(DIR))`` use it.
    Without ``calls`` every tool call the policy makes is malformed (the engine
    answers it with an error, which still exercises multi-turn); name one or two
    valid calls of your env's tools, e.g. ``calls=[{"name": "list_tables",
    "arguments": {}}]``, to have the tools themselves run during training.
    """
    directory = Path(directory)
    tokenizer = tiny_tokenizer(chat_template, calls=calls)
    model = tiny_model(tokenizer, seed=seed, bias=bias, head_dim=head_dim)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
