// Row-wise kernels for the CPU (glmcot engine): RMSNorm and rotary embedding, one pass over
// memory each instead of PyTorch's five to eight small ops, float32 arithmetic inside.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>

#include "cpu_convert.h"

namespace {

using glmcot::narrow;
using glmcot::widen;

template <typename T>
void rms_norm_rows(const T* x, const T* weight, T* out, int64_t rows, int64_t size, float eps) {
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* in = x + r * size;
      T* o = out + r * size;
      float squares = 0.f;
#pragma omp simd reduction(+ : squares)
      for (int64_t i = 0; i < size; ++i) {
        const float v = widen(in[i]);
        squares += v * v;
      }
      const float scale = 1.f / std::sqrt(squares / static_cast<float>(size) + eps);
      // As the Hugging Face reference: normalise in float32, round to the input dtype, then
      // multiply by the weight (for float32 the rounding is a no-op).
#pragma omp simd
      for (int64_t i = 0; i < size; ++i) {
        const float normed = widen(narrow<T>(widen(in[i]) * scale));
        o[i] = narrow<T>(widen(weight[i]) * normed);
      }
    }
  });
}

template <typename T>
void rotary_rows(T* x, const T* cos, const T* sin, int64_t tokens, int64_t heads, int64_t half, int64_t token_stride,
                 int64_t head_stride) {
  at::parallel_for(0, tokens * heads, 64, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / heads, h = task % heads;
      T* first = x + t * token_stride + h * head_stride;
      T* second = first + half;
      const T* c = cos + t * half;
      const T* s = sin + t * half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float a = widen(first[i]), b = widen(second[i]);
        const float ci = widen(c[i]), si = widen(s[i]);
        first[i] = narrow<T>(a * ci - b * si);
        second[i] = narrow<T>(b * ci + a * si);
      }
    }
  });
}

}  // namespace

// x [..., size] (contiguous), weight [size] in x's dtype. Returns a new tensor.
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
  TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu(), "rms_norm: CPU tensors only");
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
              "rms_norm: the weight must match the last dimension");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "rms_norm: x and weight dtypes differ");
  x = x.contiguous();
  auto w = weight.contiguous();
  auto out = torch::empty_like(x);
  const int64_t size = x.size(-1), rows = size ? x.numel() / size : 0;
  switch (x.scalar_type()) {
    case torch::kFloat: rms_norm_rows(x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), rows, size, eps); break;
    case torch::kBFloat16:
      rms_norm_rows(x.data_ptr<at::BFloat16>(), w.data_ptr<at::BFloat16>(), out.data_ptr<at::BFloat16>(), rows, size, eps);
      break;
    case torch::kHalf: rms_norm_rows(x.data_ptr<at::Half>(), w.data_ptr<at::Half>(), out.data_ptr<at::Half>(), rows, size, eps); break;
    default: TORCH_CHECK(false, "rms_norm: float32, bfloat16 or float16 only");
  }
  return out;
}

// In place on x [tokens, heads, dim] (last dimension contiguous; rows may be strided, as a
// slice of the fused qkv output is), neox half-split layout: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s).
// cos, sin: [tokens, ..., dim / 2] contiguous, in x's dtype.
void rotary_(torch::Tensor x, torch::Tensor cos, torch::Tensor sin) {
  TORCH_CHECK(x.device().is_cpu(), "rotary_: CPU tensors only");
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1 && x.size(2) % 2 == 0, "rotary_: x must be [tokens, heads, even dim]");
  const int64_t tokens = x.size(0), heads = x.size(1), half = x.size(2) / 2;
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous() && cos.numel() == tokens * half && sin.numel() == tokens * half,
              "rotary_: cos and sin must be contiguous [tokens, dim / 2]");
  TORCH_CHECK(cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type(), "rotary_: dtypes differ");
  switch (x.scalar_type()) {
    case torch::kFloat:
      rotary_rows(x.data_ptr<float>(), cos.data_ptr<float>(), sin.data_ptr<float>(), tokens, heads, half, x.stride(0), x.stride(1));
      break;
    case torch::kBFloat16:
      rotary_rows(x.data_ptr<at::BFloat16>(), cos.data_ptr<at::BFloat16>(), sin.data_ptr<at::BFloat16>(), tokens, heads, half,
                  x.stride(0), x.stride(1));
      break;
    case torch::kHalf:
      rotary_rows(x.data_ptr<at::Half>(), cos.data_ptr<at::Half>(), sin.data_ptr<at::Half>(), tokens, heads, half, x.stride(0),
                  x.stride(1));
      break;
    default: TORCH_CHECK(false, "rotary_: float32, bfloat16 or float16 only");
  }
}
