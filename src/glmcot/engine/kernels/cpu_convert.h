// Scalar element conversions shared by the CPU kernels (glmcot engine).
#pragma once

#include <torch/extension.h>

#include <cstdint>

namespace glmcot {

// Element conversions written so loops over them vectorize (c10's bfloat16 rounding is a
// branchy call per element). bfloat16: the top half of a float32, rounded to nearest even.
template <typename T>
inline float widen(const T& x) {
  return static_cast<float>(x);
}
template <>
inline float widen(const at::BFloat16& x) {
  const uint32_t bits = static_cast<uint32_t>(x.x) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

template <typename T>
inline T narrow(float f) {
  return static_cast<T>(f);
}
template <>
inline at::BFloat16 narrow(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // finite inputs: NaN is not produced by these kernels
  return at::BFloat16(static_cast<uint16_t>(bits >> 16), at::BFloat16::from_bits());
}

}  // namespace glmcot
