"""SiLU-and-multiply activation in plain PyTorch."""

import torch
import torch.nn.functional as F

__all__ = ["SiluAndMul", "silu_and_mul"]


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """silu(x[..., :d]) * x[..., d:] where d = x.shape[-1] // 2."""
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


class SiluAndMul(torch.nn.Module):
    """Module form of silu_and_mul, for kernels' layer mapping."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)
