"""SwiGLU MLP with the gate and up projections fused into one matmul."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from glmcot.engine.layers.linear import Linear


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool) -> None:
        super().__init__()
        self.intermediate = intermediate
        self.gate_up_proj = Linear(hidden, 2 * intermediate, bias=bias)
        self.down_proj = Linear(intermediate, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate, dim=-1)
        return self.down_proj(F.silu(gate).mul_(up))
