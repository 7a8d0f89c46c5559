"""RMSNorm, computed in float32 like the Hugging Face reference."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps
        self.kernel: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] | None = None  # compiled CPU kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel is not None:
            return self.kernel(x, self.weight, self.eps)
        if x.dtype == torch.float32:
            # torch's fused kernel: the same arithmetic in one pass (3x faster on per-head norms).
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)
