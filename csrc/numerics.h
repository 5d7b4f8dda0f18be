// Numerics shared by every kernel of fused_input_norm: the compiler macros, the storage types the kernels
// see, the conversions to and from fp32 (round to nearest even, as Tensor.to), and the affine's FMA.
//
// This header and the others beside it that include no torch header (strided_layout.h, memory_access.h,
// affine_kernel.h, resample_kernel.h) are compiled by nvcc for the CUDA build, by hipcc after hipify for
// ROCm (scripts/check_rocm.sh), and by the host compiler for the CPU op and for
// tests/cpp/kernel_emulation.cpp, which runs the GPU kernels' per-thread code on the host.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FIN_GPU_COMPILER 1
#define FIN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FIN_HOST_DEVICE inline __attribute__((always_inline))
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define FIN_DEVICE_PASS 1
#endif

// A host-device function the GPU compilers keep out of line: a rarely taken path of a kernel that inlines its
// source many times (the affine's strided walker reads kStridedRun values a thread, for each output dtype), which
// would otherwise carry a copy in every instantiation (torch's float32 antialiased filters' sums took the resize
// kernels' nvcc time from 37 to 139 s of CPU).
#if defined(FIN_GPU_COMPILER)
#define FIN_HOST_DEVICE_OUTLINED __host__ __device__ __noinline__
#else
#define FIN_HOST_DEVICE_OUTLINED inline
#endif

#if defined(FIN_GPU_COMPILER) && !defined(__HIPCC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace fused_input_norm {

// Storage types the kernels see. The glue reinterprets c10::Half / c10::BFloat16 (both a bare uint16_t)
// as these, so the kernel code needs no torch types.
struct half_bits {
  uint16_t x;
};
struct bfloat16_bits {
  uint16_t x;
};

FIN_HOST_DEVICE uint32_t float_as_bits(float f) {
#if defined(FIN_DEVICE_PASS)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

FIN_HOST_DEVICE float bits_as_float(uint32_t u) {
#if defined(FIN_DEVICE_PASS)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// ---- input -> float ----------------------------------------------------------------------------------
FIN_HOST_DEVICE float to_float(uint8_t v) { return static_cast<float>(v); }
FIN_HOST_DEVICE float to_float(uint16_t v) { return static_cast<float>(v); }
FIN_HOST_DEVICE float to_float(float v) { return v; }
FIN_HOST_DEVICE float to_float(bfloat16_bits v) { return bits_as_float(static_cast<uint32_t>(v.x) << 16); }

FIN_HOST_DEVICE float to_float(half_bits v) {
#if defined(FIN_DEVICE_PASS) && !defined(__HIPCC__)
  return __half2float(__ushort_as_half(v.x));
#else
  // Branch-free IEEE binary16 -> binary32 (exact). Normal numbers: re-bias the exponent by a multiply by
  // 2^-112 after placing the fields; subnormals: build 0.5 + m * 2^-24 as a float and subtract 0.5.
  const uint32_t w = static_cast<uint32_t>(v.x) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = bits_as_float((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = bits_as_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t bits = two_w < (1u << 27) ? float_as_bits(denormalized) : float_as_bits(normalized);
  return bits_as_float(sign | bits);
#endif
}

// ---- float -> output, rounding to nearest even as Tensor.to does ----------------------------------
template <typename out_t>
FIN_HOST_DEVICE out_t from_float(float f);

template <>
FIN_HOST_DEVICE float from_float<float>(float f) {
  return f;
}

template <>
FIN_HOST_DEVICE bfloat16_bits from_float<bfloat16_bits>(float f) {
  const uint32_t u = float_as_bits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  // NaN would round into Inf or flip the sign: emit the canonical quiet NaN instead, like c10::BFloat16.
  const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return bfloat16_bits{static_cast<uint16_t>(is_nan ? 0x7FC0u : rounded)};
}

template <>
FIN_HOST_DEVICE half_bits from_float<half_bits>(float f) {
#if defined(FIN_DEVICE_PASS) && !defined(__HIPCC__)
  return half_bits{__half_as_ushort(__float2half_rn(f))};
#else
  // Branch-free binary32 -> binary16 with round-to-nearest-even: adding a power of two chosen from f's
  // exponent makes the FPU do the rounding at binary16's precision; overflow saturates to Inf, NaN stays
  // NaN.
  const uint32_t w = float_as_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  const float abs_f = bits_as_float(w & 0x7FFFFFFFu);
  float base = (abs_f * 0x1.0p+112f) * 0x1.0p-110f;
  base = bits_as_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = float_as_bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return half_bits{static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign))};
#endif
}

// uint8 (the resize op's byte output): the nearest integer (ties to even, as torch.round), clamped to
// [0, 255]; NaN gives 0. Branch-free so the CPU loops vectorize; adding and subtracting 1.5 * 2^23 rounds a
// float in [0, 255] to an integer in the FPU's default mode. With weight 1 and bias 0 it is the byte itself.
template <>
FIN_HOST_DEVICE uint8_t from_float<uint8_t>(float f) {
  float c = f > 0.0f ? f : 0.0f;
  c = c < 255.0f ? c : 255.0f;
  return static_cast<uint8_t>(static_cast<int32_t>((c + 0x1.8p23f) - 0x1.8p23f));
}

// Rounds n (even) fp32 results to the output type. NVIDIA GPUs convert two at a time with one packed
// instruction (round to nearest even, as from_float), instead of the integer rounding sequence per element.
// `y` must be 4-byte aligned when n > 1 (it is a register array in the kernels).
template <typename out_t, int n>
FIN_HOST_DEVICE void round_pairs(const float* f, out_t* y) {
  constexpr int paired = n / 2 * 2;
#if defined(FIN_DEVICE_PASS) && !defined(__HIPCC__)
  if constexpr (std::is_same_v<out_t, bfloat16_bits>) {
#pragma unroll
    for (int j = 0; j < paired; j += 2)
      *reinterpret_cast<__nv_bfloat162*>(y + j) = __floats2bfloat162_rn(f[j], f[j + 1]);
  } else if constexpr (std::is_same_v<out_t, half_bits>) {
#pragma unroll
    for (int j = 0; j < paired; j += 2) *reinterpret_cast<__half2*>(y + j) = __floats2half2_rn(f[j], f[j + 1]);
  } else
#endif
  {
    for (int j = 0; j < paired; ++j) y[j] = from_float<out_t>(f[j]);
  }
  if constexpr (paired != n) y[n - 1] = from_float<out_t>(f[n - 1]);
}

// x * w + b rounded once to float, as an FMA rounds it, for targets without one (x86-64 before
// x86-64-v3). Plain `x * w + b` would round twice there (1 ulp away from the GPU's fmaf in some cases),
// and glibc's fmaf is a call per element, which stops the loops from vectorizing. The product of two floats
// is exact in double (24 + 24 significand bits <= 53); the sum is rounded to double, TwoSum gives its exact
// error, and the double is moved to the odd neighbour when the sum was inexact (round to odd). Rounding a
// round-to-odd double (53 bits >= 24 + 2) to float is then the single correct rounding of the exact value
// (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums", 2008); float subnormals and overflow
// included. Inf/NaN operands give e = NaN, which the comparisons leave alone. Every operation on p is exact,
// so an FMA contraction of any of them (GCC contracts by default) changes no result. Branch-free: the
// compiler vectorizes it.
FIN_HOST_DEVICE float fma_exact(float x, float w, float b) {
  const double p = static_cast<double>(x) * static_cast<double>(w);
  const double bd = b;
  const double s = p + bd;
  const double bv = s - p;
  const double e = (p - (s - bv)) + (bd - bv);  // s + e == p + bd exactly
  uint64_t s_bits, e_bits;
  std::memcpy(&s_bits, &s, sizeof(s));
  std::memcpy(&e_bits, &e, sizeof(e));
  // s was rounded away from zero iff e has the other sign: the truncated double is one below s's bits, then
  // set its last bit.
  const uint64_t odd = (s_bits - ((s_bits ^ e_bits) >> 63)) | 1;
  const uint64_t r_bits = (e < 0 || e > 0) ? odd : s_bits;
  double r;
  std::memcpy(&r, &r_bits, sizeof(r));
  return static_cast<float>(r);
}

// The one rounding of every backend: the exact x * w + b rounded to float (then to the output dtype by
// from_float). Hardware FMA where the target has one, the exact emulation elsewhere: the same bits on every
// CPU and GPU. The CPU kernels pick per ISA themselves (affine_cpu.cpp), since their x86 FMA code comes from
// target attributes, which define no __FMA__.
FIN_HOST_DEVICE float affine(float x, float w, float b) {
#if defined(FIN_DEVICE_PASS)
  return fmaf(x, w, b);
#elif defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(x, w, b);
#else
  return fma_exact(x, w, b);
#endif
}
}  // namespace fused_input_norm
