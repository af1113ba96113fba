"""RGB to grey and silu_and_mul as CUDA PyTorch operators."""

import torch

from . import layers
from ._ops import add_op_namespace_prefix, ops

__all__ = ["add_op_namespace_prefix", "img2grey", "layers", "ops", "silu_and_mul"]


@torch.library.register_fake(add_op_namespace_prefix("img2grey"))
def _img2grey_fake(x: torch.Tensor) -> torch.Tensor:
    torch._check(x.dim() == 3 and x.shape[2] == 3, lambda: f"img2grey: expected [H, W, 3], got {tuple(x.shape)}")
    return x.new_empty(x.shape[:2])


@torch.library.register_fake(add_op_namespace_prefix("silu_and_mul"))
def _silu_and_mul_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


def img2grey(x: torch.Tensor) -> torch.Tensor:
    """Grey value of an RGB image: x[H, W, 3] float32 (CUDA) -> [H, W]."""
    return ops.img2grey(x)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """silu(x[..., :d]) * x[..., d:] for x[..., 2d] (CUDA; float32, float16, bfloat16)."""
    return ops.silu_and_mul(x)
