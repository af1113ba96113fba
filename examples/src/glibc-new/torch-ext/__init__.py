"""Scale a tensor by a constant factor."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["add_op_namespace_prefix", "ops", "scale"]


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """x * factor (float32, CPU)."""
    return ops.scale(x, factor)
