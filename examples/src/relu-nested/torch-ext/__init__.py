"""ReLU as a compiled PyTorch operator."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["add_op_namespace_prefix", "ops", "relu"]


def relu(x: torch.Tensor) -> torch.Tensor:
    """max(x, 0), elementwise (float32 or float64, CPU)."""
    return ops.relu(x)
