"""Linear layer whose weight can be stored transposed after loading.

MKL's fp32 GEMM for a few rows (decode batches of 4-32) runs up to 1.8x faster when the weight is
laid out [in, out] than with the usual [out, in] (`F.linear`); measured in docs/benchmarks.md.
Loading always sees the Hugging Face layout; `store_transposed` switches afterwards and keeps
`weight` as a view of the same memory, so nothing is held twice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.weight_t: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight_t is None:
            return F.linear(x, self.weight, self.bias)
        if self.bias is None:
            return torch.matmul(x, self.weight_t)
        return torch.addmm(self.bias, x, self.weight_t)

    def store_transposed(self) -> None:
        self.weight_t = transposed(self.weight)
        self.weight = nn.Parameter(self.weight_t.t(), requires_grad=False)


def transposed(weight: torch.Tensor) -> torch.Tensor:
    """A contiguous [in, out] copy of an [out, in] weight."""
    return weight.detach().t().contiguous()
