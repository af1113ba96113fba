"""Negate a tensor."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["add_op_namespace_prefix", "negate", "ops"]


def negate(x: torch.Tensor) -> torch.Tensor:
    """-x (float32, CPU)."""
    return ops.negate(x)
