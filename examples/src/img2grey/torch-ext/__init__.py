"""Convert RGB images to greyscale."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["add_op_namespace_prefix", "img2grey", "ops"]


def img2grey(x: torch.Tensor) -> torch.Tensor:
    """Grey value of an RGB image: x[H, W, 3] float32 -> [H, W]."""
    return ops.img2grey(x)
