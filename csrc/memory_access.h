// Memory access of the GPU kernels (also run on the host by the emulation): aligned vectors of up to 16
// bytes, streaming loads/stores, and the read-only path for parameters.
#pragma once

#include "numerics.h"

namespace fused_input_norm {

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

}  // namespace fused_input_norm
