"""ReLU as a compiled PyTorch operator."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["add_op_namespace_prefix", "ops", "relu", "relu_"]


def relu(x: torch.Tensor) -> torch.Tensor:
    """max(x, 0), elementwise (float32 or float64, CPU)."""
    return ops.relu(x)


def relu_(x: torch.Tensor) -> torch.Tensor:
    """In-place variant: writes relu(x) into x and returns it."""
    return x.copy_(ops.relu(x))
