// The affine's per-thread GPU code and kernels: y = x * weight[c] + bias[c], fp32 math, over contiguous,
// channels-last and any strided input. Torch-free (see numerics.h): the host emulation runs the same code.
#pragma once

#include "memory_access.h"
#include "numerics.h"
#include "strided_layout.h"

namespace fused_input_norm {

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

// Where the strided walker's inputs come from: a tensor (DirectSource), or anything else that yields the
// element at an offset, such as the resampled image (ResampledSource, resample_kernel.h): resizing changes
// how an element is loaded, not the walk, the affine or the stores.
template <typename in_t>
struct DirectSource {
  const in_t* in;
  template <typename index_t>
  FIN_HOST_DEVICE float operator()(index_t offset) const {
    return to_float(in[offset]);
  }
};

template <typename Source, typename out_t, typename index_t>
FIN_HOST_DEVICE void affine_strided_source_thread(const Source& load, out_t* out, const float* weight,
                                                  const float* bias, index_t numel,
                                                  const OffsetCalculator<index_t>& calc, index_t first, index_t step) {
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
        out[i] =
            from_float<out_t>(affine(load(p.offset), load_param(weight + p.channel), load_param(bias + p.channel)));
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
      const float x = load((past ? b.offset : a.offset) + k * s0);
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
    out[i] = from_float<out_t>(affine(load(p.offset), load_param(weight + p.channel), load_param(bias + p.channel)));
  }
}

template <typename in_t, typename out_t, typename index_t>
FIN_HOST_DEVICE void affine_strided_thread(const in_t* in, out_t* out, const float* weight, const float* bias,
                                           index_t numel, const OffsetCalculator<index_t>& calc, index_t first,
                                           index_t step) {
  affine_strided_source_thread(DirectSource<in_t>{in}, out, weight, bias, numel, calc, first, step);
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

template <typename Source, typename out_t, typename index_t>
__global__ void affine_strided_source_kernel(Source load, out_t* __restrict__ out, const float* __restrict__ weight,
                                             const float* __restrict__ bias, index_t numel,
                                             OffsetCalculator<index_t> calc) {
  affine_strided_source_thread(load, out, weight, bias, numel, calc, global_thread<index_t>(), grid_threads<index_t>());
}

template <typename in_t, typename out_t, typename index_t>
__global__ void affine_strided_kernel(const in_t* __restrict__ in, out_t* __restrict__ out,
                                      const float* __restrict__ weight, const float* __restrict__ bias, index_t numel,
                                      OffsetCalculator<index_t> calc) {
  affine_strided_thread(in, out, weight, bias, numel, calc, global_thread<index_t>(), grid_threads<index_t>());
}
#endif  // FIN_GPU_COMPILER

}  // namespace fused_input_norm
