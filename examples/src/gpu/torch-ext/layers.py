"""SiluAndMul as a layer, for kernels' ``kernelize`` (its forward is the CUDA op)."""

import torch
from torch import nn

from ._ops import ops


class SiluAndMul(nn.Module):
    """silu(x[..., :d]) * x[..., d:] for x[..., 2d]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.silu_and_mul(x)
