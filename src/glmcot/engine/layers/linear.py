"""Linear layer whose weight is re-laid out for the CPU after loading.

Loading always sees the Hugging Face layout ([out, in]). On a CPU, `prepare_for_cpu` then
switches to the fastest layout measured on our machines (docs/benchmarks.md):
- oneDNN's prepacked ("blocked") weight, as vLLM's CPU backend uses: about 12 % faster
  end to end than the next best in fp32 and bf16, because small decode batches (4-32 rows)
  multiply up to 1.8x faster than with the plain layout;
- where torch was built without oneDNN, or (bf16) the CPU lacks the instructions oneDNN's bf16
  path needs: an [in, out] copy for fp32 (MKL multiplies a few rows faster that way), the plain
  layout otherwise.
The original weight is dropped once packed, so nothing is held twice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def onednn_available(dtype: torch.dtype = torch.float32) -> bool:
    if dtype not in (torch.float32, torch.bfloat16) or not torch.backends.mkldnn.is_available():
        return False
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    # oneDNN packs bf16 weights only on CPUs with AVX-512 (BW/VL/DQ) or AVX-NE-CONVERT; an AVX2
    # CPU refuses at load time, so it keeps the plain layout instead.
    if dtype == torch.bfloat16:
        supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return bool(supported()) if supported is not None else False
    return True


def pack(weight: torch.Tensor) -> torch.Tensor:
    """An opaque oneDNN copy of an [out, in] weight; the 16 is the batch size it is tuned for."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), 16)


def packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def transposed(weight: torch.Tensor) -> torch.Tensor:
    """A contiguous [in, out] copy of an [out, in] weight."""
    return weight.detach().t().contiguous()


class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.packed: torch.Tensor | None = None
        self.weight_t: torch.Tensor | None = None

    @classmethod
    def over(cls, weight: torch.Tensor) -> Linear:
        """A bias-free Linear holding `weight` ([out, in]) itself, not a copy."""
        out_features, in_features = weight.shape
        linear = cls.__new__(cls)
        nn.Module.__init__(linear)
        linear.weight = weight if isinstance(weight, nn.Parameter) else nn.Parameter(weight, requires_grad=False)
        linear.bias, linear.packed, linear.weight_t = None, None, None
        return linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return packed_linear(x, self.packed, self.bias)
        if self.weight_t is None:
            return F.linear(x, self.weight, self.bias)
        if self.bias is None:
            return torch.matmul(x, self.weight_t)
        return torch.addmm(self.bias, x, self.weight_t)

    @torch.no_grad()
    def prepare_for_cpu(self) -> None:
        if onednn_available(self.weight.dtype):
            self.packed = pack(self.weight)
            self.weight = nn.Parameter(torch.empty(0, dtype=self.weight.dtype), requires_grad=False)
        elif self.weight.dtype == torch.float32:
            self.weight_t = transposed(self.weight)
            self.weight = nn.Parameter(self.weight_t.t(), requires_grad=False)
