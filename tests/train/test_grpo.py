"""The importance weights async generation trains with: TRL's vLLM correction, mode by mode."""

from __future__ import annotations

import math

import pytest
import torch

from benchmax.train._grpo import importance_weights
from benchmax.train._trl import freeze_below


def test_token_truncate_caps_each_tokens_ratio_and_ignores_masked_and_unknown_tokens():
    log_ratio = torch.tensor([[math.log(0.5), math.log(4.0), float("nan"), 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    weights = importance_weights(log_ratio, mask, mode="token_truncate", cap=3.0)
    assert torch.allclose(weights, torch.tensor([[0.5, 3.0, 1.0, 1.0]]))


def test_sequence_modes_use_one_ratio_per_sequence_and_mask_modes_zero_what_is_out_of_bounds():
    log_ratio = torch.tensor([[math.log(2.0), math.log(2.0)], [math.log(0.5), 0.0]])
    mask = torch.ones_like(log_ratio)
    assert torch.allclose(
        importance_weights(log_ratio, mask, mode="sequence_truncate", cap=3.0), torch.tensor([[3.0], [0.5]])
    )
    assert torch.allclose(
        importance_weights(log_ratio, mask, mode="sequence_mask", cap=3.0, floor=0.6), torch.tensor([[0.0], [0.0]])
    )
    assert torch.allclose(
        importance_weights(log_ratio, mask, mode="token_mask", cap=3.0, floor=0.6),
        torch.tensor([[2.0, 2.0], [0.0, 1.0]]),
    )
    with pytest.raises(ValueError, match="token_truncate"):
        importance_weights(log_ratio, mask, mode="token", cap=3.0)


def test_weighing_the_advantages_is_trls_weighing_of_the_clipped_loss():
    torch.manual_seed(0)
    logps = torch.randn(3, 5, requires_grad=True)
    old = logps.detach() + 0.1 * torch.randn(3, 5)
    advantages = torch.randn(3, 1)
    weights = importance_weights(0.3 * torch.randn(3, 5), torch.ones(3, 5), mode="token_truncate", cap=3.0)

    def clipped(adv):
        ratio = torch.exp(logps - old)
        return -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)

    assert torch.allclose(clipped(advantages) * weights, clipped(advantages * weights))


def test_train_layers_leaves_only_the_top_layers_and_the_final_norm_trainable(tiny):
    model, _ = tiny
    freeze_below(model, 1)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    last = len(model.model.layers) - 1
    assert trainable and all(name.startswith((f"model.layers.{last}.", "model.norm.")) for name in trainable)
    assert "model.norm.weight" in trainable
