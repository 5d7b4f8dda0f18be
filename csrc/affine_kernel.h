// Kernel math and indexing for fused_input_norm: y = x * weight[c] + bias[c], fp32 math.
//
// This header includes no torch headers on purpose: it is compiled by nvcc for the CUDA build, by hipcc
// after hipify for ROCm (scripts/check_rocm.sh compile-checks it for gfx90a/gfx940), and by the host
// compiler for the CPU op and for tests/cpp/kernel_emulation.cpp, which runs the GPU kernels' per-thread
// code on the host. The channel indexing and the rounding to the output dtype live here, once.
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

// Rounds n (even) fp32 results to the output type. NVIDIA GPUs convert two at a time with one packed
// instruction (round to nearest even, as from_float), instead of the integer rounding sequence per element.
template <typename out_t, int n>
FIN_HOST_DEVICE void round_pairs(const float* f, out_t* y) {
  static_assert(n % 2 == 0, "pairs");
#if defined(FIN_DEVICE_PASS) && !defined(__HIPCC__)
  if constexpr (std::is_same_v<out_t, bfloat16_bits>) {
#pragma unroll
    for (int j = 0; j < n; j += 2) *reinterpret_cast<__nv_bfloat162*>(y + j) = __floats2bfloat162_rn(f[j], f[j + 1]);
  } else if constexpr (std::is_same_v<out_t, half_bits>) {
#pragma unroll
    for (int j = 0; j < n; j += 2) *reinterpret_cast<__half2*>(y + j) = __floats2half2_rn(f[j], f[j + 1]);
  } else
#endif
  {
    for (int j = 0; j < n; ++j) y[j] = from_float<out_t>(f[j]);
  }
}

FIN_HOST_DEVICE float affine(float x, float w, float b) {
#if defined(FIN_DEVICE_PASS)
  return fmaf(x, w, b);
#else
  return x * w + b;  // contracted to an FMA where the target has one (-ffp-contract=fast is GCC's default)
#endif
}

// ---- channel indexing --------------------------------------------------------------------------------
// A contiguous input is viewed as [outer, channels, inner]; element i belongs to channel (i / inner) %
// channels. Walking elements in order, the cursor keeps (channel, position inside the inner run) and
// advances with compares only, so a vector of elements costs one division, not one per element.
template <typename index_t>
struct ChannelCursor {
  index_t channel;
  index_t in_run;

  FIN_HOST_DEVICE ChannelCursor(index_t linear, index_t inner, index_t channels) {
    const index_t run = linear / inner;
    in_run = linear - run * inner;
    channel = run % channels;
  }

  FIN_HOST_DEVICE void advance(index_t inner, index_t channels) {
    if (++in_run == inner) {
      in_run = 0;
      channel = (channel + 1 == channels) ? 0 : channel + 1;
    }
  }
};

// Any strided input, after the glue has merged what it can: maps a row-major linear index (the contiguous
// output's) to the input's element offset and the element's channel.
constexpr int kMaxStridedDims = 8;

struct StridedLayout {
  int ndim;
  int channel_dim;  // -1: a single channel (always 0)
  int64_t sizes[kMaxStridedDims];
  int64_t strides[kMaxStridedDims];
};

FIN_HOST_DEVICE int64_t strided_offset(const StridedLayout& layout, int64_t linear, int64_t* channel) {
  int64_t offset = 0;
  *channel = 0;
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
  for (int d = kMaxStridedDims - 1; d >= 0; --d) {
    if (d < layout.ndim) {
      const int64_t size = layout.sizes[d];
      const int64_t q = linear / size;
      const int64_t coord = linear - q * size;
      linear = q;
      offset += coord * layout.strides[d];
      if (d == layout.channel_dim) *channel = coord;
    }
  }
  return offset;
}

template <typename in_t, typename out_t>
FIN_HOST_DEVICE void affine_strided_element(const in_t* in, out_t* out, const float* weight, const float* bias,
                                            const StridedLayout& layout, int64_t linear) {
  int64_t c;
  const int64_t offset = strided_offset(layout, linear, &c);
  out[linear] = from_float<out_t>(affine(to_float(in[offset]), weight[c], bias[c]));
}

// ---- the GPU kernels' per-thread work ---------------------------------------------------------------
// Written as host-and-device functions: the kernels below are one call each, and the host compiler can
// run the very same code thread by thread (tests/cpp/kernel_emulation.cpp), so the vector indexing and
// the grid-stride/tail split are tested without a GPU.
constexpr int kBytesPerLoad = 16;

// Elements per thread per step: one 16-byte access of the narrower type, whole 16-byte accesses of the
// wider one (uint8 -> bf16: 16 elements, one load, two stores).
template <typename in_t, typename out_t>
constexpr int kElemsPerVector =
    kBytesPerLoad / static_cast<int>(sizeof(in_t) < sizeof(out_t) ? sizeof(in_t) : sizeof(out_t));

#if defined(FIN_GPU_COMPILER)
using pack16_t = uint4;
#else
struct alignas(16) pack16_t {
  uint32_t x, y, z, w;
};
#endif

#if defined(__HIPCC__)
// The nontemporal builtins take clang vector types, not HIP's uint4 struct.
typedef unsigned int native_u32x4 __attribute__((ext_vector_type(4)));
#endif

// Data is touched exactly once: streaming loads/stores keep it from evicting weight/bias and other
// kernels' working sets from L2.
FIN_HOST_DEVICE pack16_t load_streaming(const pack16_t* p) {
#if defined(FIN_DEVICE_PASS) && defined(__HIPCC__)
  const native_u32x4 v = __builtin_nontemporal_load(reinterpret_cast<const native_u32x4*>(p));
  return make_uint4(v.x, v.y, v.z, v.w);
#elif defined(FIN_DEVICE_PASS)
  return __ldcs(p);
#else
  return *p;
#endif
}

FIN_HOST_DEVICE void store_streaming(pack16_t* p, pack16_t v) {
#if defined(FIN_DEVICE_PASS) && defined(__HIPCC__)
  const native_u32x4 native = {v.x, v.y, v.z, v.w};
  __builtin_nontemporal_store(native, reinterpret_cast<native_u32x4*>(p));
#elif defined(FIN_DEVICE_PASS)
  __stcs(p, v);
#else
  *p = v;
#endif
}

// weight/bias are read by every thread: through the read-only cache on the GPU.
FIN_HOST_DEVICE float load_param(const float* p) {
#if defined(FIN_DEVICE_PASS)
  return __ldg(p);
#else
  return *p;
#endif
}

// One thread of the contiguous kernel: input and output contiguous and 16-byte aligned. The thread
// handles vectors first, first + step, ... (a grid-stride loop: no grid-size limit whatever numel is),
// then the elements of the tail under one vector the same way. `in` and `out` may be the same buffer
// (in-place: each vector is read before it is written, by the same thread), so no __restrict__.
template <typename in_t, typename out_t, typename index_t>
FIN_HOST_DEVICE void affine_contiguous_thread(const in_t* in, out_t* out, const float* weight, const float* bias,
                                              index_t numel, index_t inner, index_t channels, index_t first,
                                              index_t step) {
  constexpr int VEC = kElemsPerVector<in_t, out_t>;
  constexpr int IN_LOADS = VEC * static_cast<int>(sizeof(in_t)) / kBytesPerLoad;
  constexpr int OUT_STORES = VEC * static_cast<int>(sizeof(out_t)) / kBytesPerLoad;
  const index_t num_vectors = numel / VEC;

  for (index_t v = first; v < num_vectors; v += step) {
    union {
      pack16_t raw[IN_LOADS];
      in_t elems[VEC];
    } x;
    union {
      pack16_t raw[OUT_STORES];
      out_t elems[VEC];
    } y;
    float r[VEC];
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int s = 0; s < IN_LOADS; ++s) {
      x.raw[s] = load_streaming(reinterpret_cast<const pack16_t*>(in) + v * IN_LOADS + s);
    }

    ChannelCursor<index_t> cursor(v * VEC, inner, channels);
    if (inner >= VEC) {
      // Channel runs at least a vector long (patches, NCHW): at most one channel boundary falls inside
      // the vector, so each element only picks one of two weight/bias pairs (a compare and two selects).
      const index_t next = cursor.channel + 1 == channels ? 0 : cursor.channel + 1;
      const index_t boundary = inner - cursor.in_run;  // elements left in the current channel run, >= 1
      const float w0 = load_param(weight + cursor.channel), b0 = load_param(bias + cursor.channel);
      const float w1 = load_param(weight + next), b1 = load_param(bias + next);
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
      for (int j = 0; j < VEC; ++j) {
        const bool second = static_cast<index_t>(j) >= boundary;
        r[j] = affine(to_float(x.elems[j]), second ? w1 : w0, second ? b1 : b0);
      }
    } else {
      // Short runs (NHWC: runs of 1): walk the channels element by element.
      float w = load_param(weight + cursor.channel);
      float b = load_param(bias + cursor.channel);
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
      for (int j = 0; j < VEC; ++j) {
        r[j] = affine(to_float(x.elems[j]), w, b);
        if (j + 1 < VEC) {
          const index_t previous = cursor.channel;
          cursor.advance(inner, channels);
          if (cursor.channel != previous) {
            w = load_param(weight + cursor.channel);
            b = load_param(bias + cursor.channel);
          }
        }
      }
    }
    round_pairs<out_t, VEC>(r, y.elems);
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int s = 0; s < OUT_STORES; ++s) {
      store_streaming(reinterpret_cast<pack16_t*>(out) + v * OUT_STORES + s, y.raw[s]);
    }
  }

  // The tail (under one vector) is grid-strided too, so the code is right for any grid, even one of
  // fewer than VEC - 1 threads.
  for (index_t i = num_vectors * VEC + first; i < numel; i += step) {
    const index_t c = (i / inner) % channels;
    out[i] = from_float<out_t>(affine(to_float(in[i]), load_param(weight + c), load_param(bias + c)));
  }
}

// One thread of the strided kernel: any layout, one element per step.
template <typename in_t, typename out_t>
FIN_HOST_DEVICE void affine_strided_thread(const in_t* in, out_t* out, const float* weight, const float* bias,
                                           int64_t numel, const StridedLayout& layout, int64_t first, int64_t step) {
  for (int64_t i = first; i < numel; i += step) affine_strided_element(in, out, weight, bias, layout, i);
}

#if defined(FIN_GPU_COMPILER)
// ---- GPU kernels ---------------------------------------------------------------------------------------
template <typename in_t, typename out_t, typename index_t>
__global__ void affine_contiguous_kernel(const in_t* in, out_t* out, const float* __restrict__ weight,
                                         const float* __restrict__ bias, index_t numel, index_t inner,
                                         index_t channels) {
  affine_contiguous_thread(in, out, weight, bias, numel, inner, channels,
                           static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                           static_cast<index_t>(gridDim.x) * blockDim.x);
}

// Everything else: non-contiguous input, or pointers not 16-byte aligned.
template <typename in_t, typename out_t>
__global__ void affine_strided_kernel(const in_t* in, out_t* out, const float* __restrict__ weight,
                                      const float* __restrict__ bias, int64_t numel, StridedLayout layout) {
  affine_strided_thread(in, out, weight, bias, numel, layout,
                        static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                        static_cast<int64_t>(gridDim.x) * blockDim.x);
}
#endif  // FIN_GPU_COMPILER

}  // namespace fused_input_norm
