"""Convert RGB images to greyscale."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["WEIGHTS", "add_op_namespace_prefix", "img2grey", "ops"]

# ITU-R BT.601 luma weights, as applied by the compiled op.
WEIGHTS = (0.299, 0.587, 0.114)


def img2grey(x: torch.Tensor) -> torch.Tensor:
    """Grey value of an RGB image: x[H, W, 3] float32 -> [H, W]."""
    if x.dim() != 3 or x.shape[-1] != 3:
        raise ValueError(f"img2grey expects a [H, W, 3] tensor, got {tuple(x.shape)}")
    return ops.img2grey(x)
