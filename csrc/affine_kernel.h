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

// ---- strided layouts: the one index scheme of both backends -----------------------------------------
// The output is always row-major (contiguous, input's shape). A StridedLayout describes where the input's
// elements are, in the output's order: dims innermost first, size-1 dims dropped, and neighbours merged
// where the outer one steps exactly over the inner one (never across the channel dim). The glue builds it
// once per call; the CPU walks it with a counter, the GPU maps indices through an OffsetCalculator.
constexpr int kMaxDims = 10;

struct StridedLayout {
  int ndim;         // >= 1
  int channel_dim;  // in sizes/strides (innermost = 0); -1 when the channel dim has size 1
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];  // in input elements; 0 for broadcast (expanded) dims
};

// Host only. Returns false when more than kMaxDims dims survive merging (the glue then copies).
inline bool build_strided_layout(int ndim, const int64_t* sizes, const int64_t* strides, int channel_dim,
                                 StridedLayout* layout) {
  StridedLayout l{};
  l.channel_dim = -1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    const bool is_channel = d == channel_dim;
    const int n = l.ndim;
    if (n > 0 && !is_channel && l.channel_dim != n - 1 && strides[d] == l.sizes[n - 1] * l.strides[n - 1]) {
      l.sizes[n - 1] *= sizes[d];
      continue;
    }
    if (n == kMaxDims) return false;
    l.sizes[n] = sizes[d];
    l.strides[n] = strides[d];
    if (is_channel) l.channel_dim = n;
    l.ndim = n + 1;
  }
  if (l.ndim == 0) {  // a single element
    l.ndim = 1;
    l.sizes[0] = 1;
    l.strides[0] = 1;
  }
  *layout = l;
  return true;
}

// Channels-last input read channels-first (HWC -> CHW, NHWC -> NCHW): the input is contiguous
// [outer, pixels, channels] and the output [outer, channels, pixels]. Host only.
struct ChannelsLastShape {
  int64_t outer, channels, pixels;
};

inline bool as_channels_last(const StridedLayout& l, ChannelsLastShape* shape) {
  if (l.ndim < 2 || l.ndim > 3 || l.channel_dim != 1) return false;
  const int64_t c = l.sizes[1], m = l.sizes[0];
  if (c < 2 || c > 4 || l.strides[1] != 1 || l.strides[0] != c) return false;
  if (l.ndim == 3 && l.strides[2] != c * m) return false;
  *shape = {l.ndim == 3 ? l.sizes[2] : 1, c, m};
  return true;
}

// n / d with a precomputed magic number (as PyTorch's IntDivider): valid for n, d < 2^31, which the glue
// guarantees before choosing 32-bit indexing. The 64-bit form divides.
template <typename index_t>
struct IntDivider {
  index_t divisor;
  FIN_HOST_DEVICE index_t div(index_t n) const { return n / divisor; }
};

template <>
struct IntDivider<uint32_t> {
  uint32_t divisor, magic, shift;
  FIN_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(FIN_DEVICE_PASS)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
};

template <typename index_t>
inline IntDivider<index_t> make_divider(index_t d) {  // host only; d >= 1
  IntDivider<index_t> r{};
  r.divisor = d;
  if constexpr (std::is_same_v<index_t, uint32_t>) {
    while (r.shift < 32 && (uint64_t{1} << r.shift) < d) ++r.shift;
    r.magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << r.shift) - d)) / d + 1);
  }
  return r;
}

// Maps the output's linear index to the input's element offset and channel: one magic-number division
// per dim in 32-bit indexing.
template <typename index_t>
struct OffsetCalculator {
  struct Position {
    index_t offset;   // input element offset
    index_t channel;  // weight/bias index
    index_t inner;    // coordinate along dim 0 (to step along it without dividing)
  };

  int ndim;
  int channel_dim;
  IntDivider<index_t> sizes[kMaxDims];
  index_t strides[kMaxDims];

  FIN_HOST_DEVICE Position locate(index_t linear) const {
    Position p{0, 0, 0};
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const index_t q = sizes[d].div(linear);
      const index_t coord = linear - q * sizes[d].divisor;
      p.offset += coord * strides[d];
      if (d == channel_dim) p.channel = coord;
      if (d == 0) p.inner = coord;
      linear = q;
    }
    return p;
  }
};

template <typename index_t>
inline OffsetCalculator<index_t> make_offset_calculator(const StridedLayout& l) {  // host only
  OffsetCalculator<index_t> calc{};
  calc.ndim = l.ndim;
  calc.channel_dim = l.channel_dim;
  for (int d = 0; d < l.ndim; ++d) {
    calc.sizes[d] = make_divider(static_cast<index_t>(l.sizes[d]));
    calc.strides[d] = static_cast<index_t>(l.strides[d]);
  }
  return calc;
}

// ---- memory access --------------------------------------------------------------------------------
constexpr int kBytesPerLoad = 16;

// The unsigned type moved by one aligned access of BYTES bytes.
#if defined(__HIPCC__)
typedef unsigned int native_u32x4 __attribute__((ext_vector_type(4)));  // the nontemporal builtins take
typedef unsigned int native_u32x2 __attribute__((ext_vector_type(2)));  // clang vectors, not HIP's uint4
#endif
template <int BYTES>
struct Chunk;
template <>
struct Chunk<16> {
#if defined(__HIPCC__)
  using type = native_u32x4;
#elif defined(FIN_GPU_COMPILER)
  using type = uint4;
#else
  struct alignas(16) type {
    uint32_t w[4];
  };
#endif
};
template <>
struct Chunk<8> {
#if defined(__HIPCC__)
  using type = native_u32x2;
#elif defined(FIN_GPU_COMPILER)
  using type = uint2;
#else
  using type = uint64_t;
#endif
};
template <>
struct Chunk<4> {
  using type = uint32_t;
};
template <>
struct Chunk<2> {
  using type = uint16_t;
};
template <>
struct Chunk<1> {
  using type = uint8_t;
};

// Data is touched exactly once: streaming loads/stores keep it from evicting weight/bias and other
// kernels' working sets from L2.
template <typename T>
FIN_HOST_DEVICE T load_streaming(const T* p) {
#if defined(FIN_DEVICE_PASS) && defined(__HIPCC__)
  return __builtin_nontemporal_load(p);
#elif defined(FIN_DEVICE_PASS)
  return __ldcs(p);
#else
  return *p;
#endif
}

template <typename T>
FIN_HOST_DEVICE void store_streaming(T* p, T v) {
#if defined(FIN_DEVICE_PASS) && defined(__HIPCC__)
  __builtin_nontemporal_store(v, p);
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

// N elements of T in registers, moved by aligned accesses of up to 16 bytes: the pointer must be aligned
// to kAccess bytes.
template <typename T, int N>
struct Vec {
  static constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static constexpr int kAccess = kBytes < kBytesPerLoad ? kBytes : kBytesPerLoad;
  using chunk_t = typename Chunk<kAccess>::type;
  union {
    chunk_t raw[kBytes / kAccess];
    T elems[N];
  };

  FIN_HOST_DEVICE void load(const T* p) {
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int s = 0; s < kBytes / kAccess; ++s) raw[s] = load_streaming(reinterpret_cast<const chunk_t*>(p) + s);
  }
  FIN_HOST_DEVICE void store(T* p) const {
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int s = 0; s < kBytes / kAccess; ++s) store_streaming(reinterpret_cast<chunk_t*>(p) + s, raw[s]);
  }
};

template <typename T, int N>
FIN_HOST_DEVICE bool is_aligned_for(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % Vec<T, N>::kAccess == 0;
}

// Elements per vector at full width: one 16-byte access of the narrower type, whole 16-byte accesses of
// the wider one (uint8 -> bf16: 16 elements, one load, two stores). Misaligned pointers get narrower
// vectors (VEC / 2, / 4, ... down to 1), never the strided kernel.
template <typename in_t, typename out_t>
constexpr int kElemsPerVector =
    kBytesPerLoad / static_cast<int>(sizeof(in_t) < sizeof(out_t) ? sizeof(in_t) : sizeof(out_t));

template <typename in_t, typename out_t, int VEC>
FIN_HOST_DEVICE bool vectors_fit(const in_t* in, const out_t* out) {
  return is_aligned_for<in_t, VEC>(in) && is_aligned_for<out_t, VEC>(out);
}

// ---- the GPU kernels' per-thread work ---------------------------------------------------------------
// Written as host-and-device functions: the kernels below are one call each, and the host compiler runs
// the very same code thread by thread (tests/cpp/kernel_emulation.cpp), so the vector indexing and the
// grid-stride/tail split are tested without a GPU.

// A contiguous input is [outer, channels, inner]: element i has channel (i / inner) % channels. The
// cursor keeps (channel, position in the run) and advances with compares only.
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

// Normalizes and stores vector v (elements v * VEC ...) of a contiguous input.
template <typename in_t, typename out_t, int VEC, typename index_t>
FIN_HOST_DEVICE void affine_contiguous_vector(const Vec<in_t, VEC>& x, out_t* out, const float* weight,
                                              const float* bias, index_t v, index_t inner, index_t channels) {
  float r[VEC];
  ChannelCursor<index_t> cursor(v * VEC, inner, channels);
  if (inner >= VEC) {
    // Channel runs at least a vector long (patches, NCHW): at most one channel boundary falls inside the
    // vector, so each element only picks one of two weight/bias pairs (a compare and two selects).
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
    // Short runs other than channels-last with <= 4 channels (which has its own kernel): walk the
    // channels element by element.
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
  Vec<out_t, VEC> y;
  round_pairs<out_t, VEC>(r, y.elems);
  y.store(out + v * VEC);
}

// One thread of the contiguous kernel: input and output contiguous and aligned for Vec<., VEC>. The thread
// handles vectors first, first + step, ... (a grid-stride loop: no grid-size limit whatever numel is), two
// loads in flight per iteration, then the elements of the tail under one vector the same way. `in` and
// `out` may be the same buffer (in place: a vector is read before it is written, by the same thread), so no
// __restrict__.
template <typename in_t, typename out_t, int VEC, typename index_t>
FIN_HOST_DEVICE void affine_contiguous_thread(const in_t* in, out_t* out, const float* weight, const float* bias,
                                              index_t numel, index_t inner, index_t channels, index_t first,
                                              index_t step) {
  const index_t num_vectors = numel / VEC;
  index_t v = first;
  for (; v + step < num_vectors; v += 2 * step) {
    Vec<in_t, VEC> a, b;
    a.load(in + v * VEC);
    b.load(in + (v + step) * VEC);
    affine_contiguous_vector(a, out, weight, bias, v, inner, channels);
    affine_contiguous_vector(b, out, weight, bias, v + step, inner, channels);
  }
  if (v < num_vectors) {
    Vec<in_t, VEC> a;
    a.load(in + v * VEC);
    affine_contiguous_vector(a, out, weight, bias, v, inner, channels);
  }
  // The tail (under one vector) is grid-strided too, so the code is right for any grid.
  for (index_t i = num_vectors * VEC + first; i < numel; i += step) {
    const index_t c = (i / inner) % channels;
    out[i] = from_float<out_t>(affine(to_float(in[i]), load_param(weight + c), load_param(bias + c)));
  }
}

// Channels-last input, C = 2..4 channels interleaved: a group is VEC pixels, C input vectors, in which
// element e has channel e % C, known at compile time, so weight/bias live in registers for the whole
// thread. `planar` writes each channel's VEC results to its own plane (HWC -> CHW: input [outer, pixels,
// C], output [outer, C, pixels], pixels a multiple of VEC); otherwise the output is interleaved like the
// input (NHWC -> NHWC) and a tail under one group is done element by element.
template <typename in_t, typename out_t, int C, bool planar, typename index_t>
FIN_HOST_DEVICE void affine_pixels_thread_c(const in_t* in, out_t* out, const float* weight, const float* bias,
                                            index_t numel, index_t pixels, index_t first, index_t step) {
  constexpr int VEC = kElemsPerVector<in_t, out_t>;
  float w[C], b[C];
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
  for (int c = 0; c < C; ++c) {
    w[c] = load_param(weight + c);
    b[c] = load_param(bias + c);
  }
  const index_t groups = numel / (C * VEC);
  const index_t groups_per_image = pixels / VEC;  // planar only
  for (index_t g = first; g < groups; g += step) {
    Vec<in_t, C * VEC> x;
    x.load(in + g * (C * VEC));
    float r[C * VEC];
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int e = 0; e < C * VEC; ++e) r[e] = affine(to_float(x.elems[e]), w[e % C], b[e % C]);
    if constexpr (planar) {
      const index_t image = g / groups_per_image;
      out_t* plane0 = out + image * (C * pixels) + (g - image * groups_per_image) * VEC;
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
      for (int c = 0; c < C; ++c) {
        float channel[VEC];
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
        for (int p = 0; p < VEC; ++p) channel[p] = r[p * C + c];
        Vec<out_t, VEC> y;
        round_pairs<out_t, VEC>(channel, y.elems);
        y.store(plane0 + c * pixels);
      }
    } else {
      Vec<out_t, C * VEC> y;
      round_pairs<out_t, C * VEC>(r, y.elems);
      y.store(out + g * (C * VEC));
    }
  }
  if constexpr (!planar) {
    for (index_t i = groups * (C * VEC) + first; i < numel; i += step) {
      const index_t c = i % C;  // through the cache: indexing the register arrays at run time would spill
      out[i] = from_float<out_t>(affine(to_float(in[i]), load_param(weight + c), load_param(bias + c)));
    }
  }
}

template <typename in_t, typename out_t, bool planar, typename index_t>
FIN_HOST_DEVICE void affine_pixels_thread(const in_t* in, out_t* out, const float* weight, const float* bias,
                                          index_t numel, int channels, index_t pixels, index_t first, index_t step) {
  switch (channels) {
    case 2:
      return affine_pixels_thread_c<in_t, out_t, 2, planar>(in, out, weight, bias, numel, pixels, first, step);
    case 3:
      return affine_pixels_thread_c<in_t, out_t, 3, planar>(in, out, weight, bias, numel, pixels, first, step);
    default:
      return affine_pixels_thread_c<in_t, out_t, 4, planar>(in, out, weight, bias, numel, pixels, first, step);
  }
}

// Any layout: each step of a thread does kStridedRun consecutive outputs. When the innermost dim is at
// least a run long, a run crosses at most one end of it: the run's first output and, if it crosses, the
// first output past the end are located with the offset calculator, and every output of the run is one of
// the two plus a step along the innermost dim (two index computations per 8 outputs, weight/bias in
// registers unless the channel is the innermost dim). The results go out in one vector store when `out` is
// aligned for it. A shorter innermost dim locates every output.
constexpr int kStridedRun = 8;

template <typename in_t, typename out_t, typename index_t>
FIN_HOST_DEVICE void affine_strided_thread(const in_t* in, out_t* out, const float* weight, const float* bias,
                                           index_t numel, const OffsetCalculator<index_t>& calc, index_t first,
                                           index_t step) {
  constexpr int E = kStridedRun;
  const index_t runs = numel / E;
  const index_t n0 = calc.sizes[0].divisor;
  const index_t s0 = calc.strides[0];
  const bool channel_inner = calc.channel_dim == 0;
  const bool vector_store = is_aligned_for<out_t, E>(out);
  for (index_t g = first; g < runs; g += step) {
    const index_t i0 = g * E;
    if (n0 < static_cast<index_t>(E)) {
#if defined(FIN_GPU_COMPILER)
#pragma unroll 1  // one copy of the index math, not eight
#endif
      for (index_t i = i0; i < i0 + E; ++i) {
        const auto p = calc.locate(i);
        out[i] = from_float<out_t>(
            affine(to_float(in[p.offset]), load_param(weight + p.channel), load_param(bias + p.channel)));
      }
      continue;
    }
    const auto a = calc.locate(i0);
    const index_t left = n0 - a.inner;  // outputs of the run before the innermost dim ends, >= 1
    const auto b = left < static_cast<index_t>(E) ? calc.locate(i0 + left) : a;
    const float wa = load_param(weight + a.channel), ba = load_param(bias + a.channel);
    const float wb = load_param(weight + b.channel), bb = load_param(bias + b.channel);
    float r[E];
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int j = 0; j < E; ++j) {
      const bool past = static_cast<index_t>(j) >= left;
      const index_t k = past ? static_cast<index_t>(j) - left : static_cast<index_t>(j);  // steps from a or b
      const float x = to_float(in[(past ? b.offset : a.offset) + k * s0]);
      if (channel_inner) {
        const index_t c = (past ? b.channel : a.channel) + k;
        r[j] = affine(x, load_param(weight + c), load_param(bias + c));
      } else {
        r[j] = affine(x, past ? wb : wa, past ? bb : ba);
      }
    }
    Vec<out_t, E> y;
    round_pairs<out_t, E>(r, y.elems);
    if (vector_store) {
      y.store(out + i0);
    } else {
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
      for (int j = 0; j < E; ++j) out[i0 + j] = y.elems[j];
    }
  }
  for (index_t i = runs * E + first; i < numel; i += step) {
    const auto p = calc.locate(i);
    out[i] =
        from_float<out_t>(affine(to_float(in[p.offset]), load_param(weight + p.channel), load_param(bias + p.channel)));
  }
}

#if defined(FIN_GPU_COMPILER)
// ---- GPU kernels ---------------------------------------------------------------------------------------
template <typename index_t>
__device__ __forceinline__ index_t global_thread() {
  return static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
template <typename index_t>
__device__ __forceinline__ index_t grid_threads() {
  return static_cast<index_t>(gridDim.x) * blockDim.x;
}

template <typename in_t, typename out_t, typename index_t, int VEC>
__global__ void affine_contiguous_kernel(const in_t* in, out_t* out, const float* __restrict__ weight,
                                         const float* __restrict__ bias, index_t numel, index_t inner,
                                         index_t channels) {
  affine_contiguous_thread<in_t, out_t, VEC>(in, out, weight, bias, numel, inner, channels, global_thread<index_t>(),
                                             grid_threads<index_t>());
}

template <typename in_t, typename out_t, typename index_t, bool planar>
__global__ void affine_pixels_kernel(const in_t* in, out_t* out, const float* __restrict__ weight,
                                     const float* __restrict__ bias, index_t numel, int channels, index_t pixels) {
  affine_pixels_thread<in_t, out_t, planar>(in, out, weight, bias, numel, channels, pixels, global_thread<index_t>(),
                                            grid_threads<index_t>());
}

template <typename in_t, typename out_t, typename index_t>
__global__ void affine_strided_kernel(const in_t* __restrict__ in, out_t* __restrict__ out,
                                      const float* __restrict__ weight, const float* __restrict__ bias, index_t numel,
                                      OffsetCalculator<index_t> calc) {
  affine_strided_thread(in, out, weight, bias, numel, calc, global_thread<index_t>(), grid_threads<index_t>());
}
#endif  // FIN_GPU_COMPILER

}  // namespace fused_input_norm
