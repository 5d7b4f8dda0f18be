// The CPU kernels, without torch: the per-chunk loops of every layout (contiguous, channels-last read
// channels-first, strided) and the split of a call into parallel chunks, on the process's CPU capability
// (cpu_capability.h, linked with cpu_capability.cpp). csrc/affine_cpu.cpp runs them with torch's
// parallel_for, csrc/resample_cpu_bands.h on its resampled bands; tests/cpp/cpu_kernels.cpp runs them without
// torch (natively, and on aarch64 under qemu). Everything here is internal to each unit that includes it.
// FIN_CPU_PLAIN leaves out every SIMD path of ours (the x86 capabilities, NEON's float16 conversion): the
// plain C++ build the test driver compares against.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "affine_kernel.h"
#include "cpu_capability.h"

#if defined(FIN_X86)
#include <immintrin.h>
#endif
#if defined(FIN_NEON)
#include <arm_neon.h>
#endif

// The inner loops are compiled once per CPU capability (cpu_capability.h: which ones, and how one is
// chosen). The kernels (FIN_CPU_KERNEL) are always-inline templates on the capability; with_cpu_capability
// inlines one into a function compiled with that capability's target attribute, so each gets its own vector
// code. Each capability computes x * w + b with one rounding (affine_on), so all give the same bits.
#define FIN_CPU_KERNEL inline __attribute__((always_inline))

namespace fused_input_norm {
namespace {

// x * w + b with one rounding on every capability: the hardware FMA where the capability has one (an
// explicit fmaf: the contraction of `x * w + b` is the compiler's choice, not a promise), the exact
// emulation on the x86-64 baseline (affine() picks the hardware one where the whole build targets it).
template <CpuCapability cap>
FIN_CPU_KERNEL float affine_on(float x, float w, float b) {
  if constexpr (cap == CpuCapability::kDefault) {
    return affine(x, w, b);
  } else {
    return __builtin_fmaf(x, w, b);
  }
}

// Elements per parallel task: large enough to amortize scheduling, small enough to split big tensors
// evenly across threads.
constexpr int64_t kGrain = 1 << 15;
// Channel runs (`inner`) at least this long are processed one run at a time with a scalar weight/bias.
constexpr int64_t kMinRun = 64;
// Shorter runs (NHWC: runs of 1) repeat with period channels * inner: the weight/bias pattern of one
// period is unrolled into a block of at least kMinBlock elements and applied block by block.
constexpr int64_t kMinBlock = 256;
constexpr int64_t kMaxPeriod = 2048;

// float -> float16 for a buffer. The compilers do not vectorize the software rounding in from_float, so
// on x86 with F16C (every x86-64-v3 CPU: the avx2 and avx512 capabilities) the conversion is the
// hardware's, which also rounds to nearest even: the same bits.
void floats_to_half_scalar(const float* src, half_bits* dst, int64_t n) {
  for (int64_t k = 0; k < n; ++k) dst[k] = from_float<half_bits>(src[k]);
}

#if defined(FIN_X86)
__attribute__((target("avx,f16c"))) void floats_to_half_f16c(const float* src, half_bits* dst, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), h);
  }
  floats_to_half_scalar(src + k, dst + k, n - k);
}
#endif

// aarch64: FCVTN, which rounds to nearest even (FPCR's default mode): the same bits as from_float and F16C.
#if defined(FIN_NEON)
void floats_to_half_neon(const float* src, half_bits* dst, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const float16x8_t h = vcombine_f16(vcvt_f16_f32(vld1q_f32(src + k)), vcvt_f16_f32(vld1q_f32(src + k + 4)));
    vst1q_u16(reinterpret_cast<uint16_t*>(dst + k), vreinterpretq_u16_f16(h));
  }
  floats_to_half_scalar(src + k, dst + k, n - k);
}
#endif

// The baseline capability is the baseline ISA: no F16C (a CPU with F16C but no AVX2 loses the fast
// conversion; forcing "default" then runs the software rounding the baseline really runs).
template <CpuCapability cap>
FIN_CPU_KERNEL void floats_to_half(const float* src, half_bits* dst, int64_t n) {
#if defined(FIN_X86)
  if constexpr (cap == CpuCapability::kAvx2 || cap == CpuCapability::kAvx512) {
    floats_to_half_f16c(src, dst, n);
    return;
  }
#elif defined(FIN_NEON)
  if constexpr (cap == CpuCapability::kNeon) {
    floats_to_half_neon(src, dst, n);
    return;
  }
#endif
  floats_to_half_scalar(src, dst, n);
}

// The weight and bias of element j of a stretch: one pair for a whole channel run, or a per-element
// pattern for short runs.
struct RunParams {
  float w, b;
  float weight(int64_t) const { return w; }
  float bias(int64_t) const { return b; }
};
struct PatternParams {
  const float* w;
  const float* b;
  float weight(int64_t j) const { return w[j]; }
  float bias(int64_t j) const { return b[j]; }
};

// y[0, n) = x[j * stride] * weight + bias: one loop the compiler vectorizes (STRIDE is the input stride
// when known at compile time, 0 when it is the `stride` argument); float16 output goes through a small
// float buffer and floats_to_half.
template <CpuCapability cap, int STRIDE = 1, typename in_t, typename out_t, typename Params>
FIN_CPU_KERNEL void affine_stretch(const in_t* x, out_t* y, int64_t n, Params p, int64_t stride = STRIDE) {
  const int64_t step = STRIDE != 0 ? STRIDE : stride;
  if constexpr (std::is_same_v<out_t, half_bits>) {
    constexpr int64_t kChunk = 256;
    float buffer[kChunk];
    for (int64_t s = 0; s < n; s += kChunk) {
      const int64_t m = std::min(kChunk, n - s);
      for (int64_t j = 0; j < m; ++j) {
        buffer[j] = affine_on<cap>(to_float(x[(s + j) * step]), p.weight(s + j), p.bias(s + j));
      }
      floats_to_half<cap>(buffer, y + s, m);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      y[j] = from_float<out_t>(affine_on<cap>(to_float(x[j * step]), p.weight(j), p.bias(j)));
    }
  }
}

// Runs [begin, end) of a contiguous [outer, channels, inner] input whose channel runs are long, one run
// at a time. One call per parallel chunk, so the clone dispatch and the loop set-up are not paid per run.
template <CpuCapability cap, typename in_t, typename out_t>
FIN_CPU_KERNEL void affine_runs(const in_t* in, out_t* out, const float* weight, const float* bias, int64_t run_begin,
                                int64_t run_end, int64_t inner, int64_t channels) {
  for (int64_t r = run_begin; r < run_end; ++r) {
    const int64_t c = r % channels;
    affine_stretch<cap>(in + r * inner, out + r * inner, inner, RunParams{weight[c], bias[c]});
  }
}

// Blocks [begin, end) of `block` elements each, every block starting at channel phase 0 and using the
// unrolled per-element weight/bias pattern of one block.
template <CpuCapability cap, typename in_t, typename out_t>
FIN_CPU_KERNEL void affine_blocks(const in_t* in, out_t* out, const float* w_block, const float* b_block,
                                  int64_t block_begin, int64_t block_end, int64_t block, int64_t numel) {
  for (int64_t k = block_begin; k < block_end; ++k) {
    const int64_t start = k * block;
    affine_stretch<cap>(in + start, out + start, std::min(block, numel - start), PatternParams{w_block, b_block});
  }
}

// Channels-last pixels [p_begin, p_end) of one image, read from [pixels, C] and written to C planes of
// `plane` elements. One pass reads every channel of a pixel: the compiler's vector loop loads whole groups of
// C elements and de-interleaves them with permutes. (C passes of a stride-C loop, one per channel, each
// re-loaded and re-permuted the same bytes, and each pass peeled its last vectors into the scalar loop,
// because a vector of channel c's elements reads past the last pixel it needs: ~30% of the executed
// instructions of HWC -> CHW u8 -> bf16 on avx512.) float16 output goes through float buffers, one per channel,
// and floats_to_half, as affine_stretch does.
template <CpuCapability cap, typename in_t, typename out_t, int C>
FIN_CPU_KERNEL void affine_planar(const in_t* in, out_t* out, const float* weight, const float* bias, int64_t plane,
                                  int64_t p_begin, int64_t p_end) {
  float w[C], b[C];
  for (int c = 0; c < C; ++c) w[c] = weight[c], b[c] = bias[c];
  constexpr bool kHalf = std::is_same_v<out_t, half_bits>;
  constexpr int64_t kBlock = kHalf ? 256 : 1024;
  for (int64_t p = p_begin; p < p_end; p += kBlock) {
    const int64_t n = std::min(kBlock, p_end - p);
    const in_t* x = in + p * C;
    if constexpr (kHalf) {
      float buffer[C][kBlock];
      for (int64_t j = 0; j < n; ++j) {
        for (int c = 0; c < C; ++c) buffer[c][j] = affine_on<cap>(to_float(x[j * C + c]), w[c], b[c]);
      }
      for (int c = 0; c < C; ++c) floats_to_half<cap>(buffer[c], out + c * plane + p, n);
    } else {
      out_t* y[C];
      for (int c = 0; c < C; ++c) y[c] = out + c * plane + p;
      for (int64_t j = 0; j < n; ++j) {
        for (int c = 0; c < C; ++c) y[c][j] = from_float<out_t>(affine_on<cap>(to_float(x[j * C + c]), w[c], b[c]));
      }
    }
  }
}

// Pixels [begin, end) of the whole batch (outer * pixels of them), image by image.
template <CpuCapability cap, typename in_t, typename out_t>
FIN_CPU_KERNEL void affine_channels_last(const in_t* in, out_t* out, const float* weight, const float* bias,
                                         ChannelsLastShape shape, int64_t begin, int64_t end) {
  const int64_t m = shape.pixels, c = shape.channels;
  for (int64_t p = begin; p < end;) {
    const int64_t image = p / m;
    const int64_t first = p - image * m, last = std::min(m, first + (end - p));
    const in_t* x = in + image * m * c;
    out_t* y = out + image * m * c;
    switch (c) {
      case 2:
        affine_planar<cap, in_t, out_t, 2>(x, y, weight, bias, m, first, last);
        break;
      case 3:
        affine_planar<cap, in_t, out_t, 3>(x, y, weight, bias, m, first, last);
        break;
      default:
        affine_planar<cap, in_t, out_t, 4>(x, y, weight, bias, m, first, last);
    }
    p += last - first;
  }
}

// Copies `bytes` (>= 1) between buffers that do not overlap: up to 64 bytes with two fixed-size moves that
// overlap each other (a patch row of 14 bytes: two 8-byte moves) instead of a call to memcpy. Short rows of
// wider inputs (63 float32 elements: 252 bytes) take memcpy.
inline __attribute__((always_inline)) void copy_short(void* dst, const void* src, int64_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (bytes > 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  const auto two_moves = [&](auto size) {
    constexpr int64_t k = decltype(size)::value;
    std::memcpy(d, s, k);
    std::memcpy(d + bytes - k, s + bytes - k, k);
  };
  if (bytes >= 32) return two_moves(std::integral_constant<int64_t, 32>{});
  if (bytes >= 16) return two_moves(std::integral_constant<int64_t, 16>{});
  if (bytes >= 8) return two_moves(std::integral_constant<int64_t, 8>{});
  if (bytes >= 4) return two_moves(std::integral_constant<int64_t, 4>{});
  for (int64_t k = 0; k < bytes; ++k) d[k] = s[k];
}

// rows x n0 outputs (contiguous) from rows of n0 inputs, input strides s0 (in a row) and s1 (between rows).
// The channel is fixed (kFixed: weight[0]), one per row (kPerRow: weight[r]) or one per element (kPerElement:
// weight[j]).
enum class ChannelIn { kFixed, kPerRow, kPerElement };

template <CpuCapability cap, typename in_t, typename out_t>
FIN_CPU_KERNEL void affine_tile(const in_t* in, out_t* out, int64_t n0, int64_t s0, int64_t rows, int64_t s1,
                                const float* weight, const float* bias, ChannelIn channel) {
  constexpr int64_t kShortRow = 64;
  if constexpr (std::is_same_v<in_t, uint8_t> && std::is_same_v<out_t, uint8_t>) {
    // The resize op's byte output with weight 1 and bias 0 (vLLM's device-normalize path): the affine of a
    // byte is the byte itself (from_float rounds x * 1 + 0 to x), so the rows are copied, not converted.
    if (s0 == 1 && channel == ChannelIn::kFixed && weight[0] == 1.0f && bias[0] == 0.0f) {
      for (int64_t r = 0; r < rows; ++r) copy_short(out + r * n0, in + r * s1, n0);
      return;
    }
  }
  if (s0 == 1 && n0 < kShortRow && channel == ChannelIn::kFixed) {
    // Short rows (patch rows of 14 or 16): too short for the vector loop, so gather a batch of them into a
    // contiguous buffer (in L1) and normalize the batch as one stretch.
    constexpr int64_t kBuffer = 4096;
    in_t buffer[kBuffer];
    const int64_t batch = kBuffer / n0;
    const RunParams p{weight[0], bias[0]};
    for (int64_t r0 = 0; r0 < rows; r0 += batch) {
      const int64_t n = std::min(batch, rows - r0);
      for (int64_t r = 0; r < n; ++r) {
        copy_short(buffer + r * n0, in + (r0 + r) * s1, n0 * static_cast<int64_t>(sizeof(in_t)));
      }
      affine_stretch<cap>(buffer, out + r0 * n0, n * n0, p);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const in_t* x = in + r * s1;
    out_t* y = out + r * n0;
    if (channel == ChannelIn::kPerElement) {
      const PatternParams p{weight, bias};
      s0 == 1 ? affine_stretch<cap>(x, y, n0, p) : affine_stretch<cap, 0>(x, y, n0, p, s0);
    } else {
      const int64_t c = channel == ChannelIn::kPerRow ? r : 0;
      const RunParams p{weight[c], bias[c]};
      s0 == 1 ? affine_stretch<cap>(x, y, n0, p) : affine_stretch<cap, 0>(x, y, n0, p, s0);
    }
  }
}

// A position in a strided layout: coordinates (innermost first) and the input offset they give.
struct LayoutCounter {
  int nd;
  int64_t size[kMaxDims], stride[kMaxDims], coord[kMaxDims];
  int64_t offset;

  LayoutCounter(const StridedLayout& layout, int64_t linear) : nd(std::max(layout.ndim, 2)), offset(0) {
    for (int d = 0; d < nd; ++d) {  // a 1-D layout gets a dim 1 of size 1
      size[d] = d < layout.ndim ? layout.sizes[d] : 1;
      stride[d] = d < layout.ndim ? layout.strides[d] : 0;
      coord[d] = linear % size[d];
      linear /= size[d];
      offset += coord[d] * stride[d];
    }
  }

  // Moves `n` along dim d (coord[d] + n <= size[d]); at the end of the dim, to the next coordinate of the
  // dims outside it.
  void step(int d, int64_t n) {
    coord[d] += n;
    offset += n * stride[d];
    for (; d < nd && coord[d] == size[d]; ++d) {
      coord[d] = 0;
      offset -= size[d] * stride[d];
      if (d + 1 < nd) {
        ++coord[d + 1];
        offset += stride[d + 1];
      }
    }
  }
};

// Output elements [begin, end) of any strided layout, in order: the two innermost dims as tiles (a partial
// row where the range starts or ends mid-row), a counter over the outer dims. Dividing happens once, to
// find where `begin` is. Rows shorter than a cache line (patches) come from as many lines as rows, in an
// order the hardware prefetcher cannot follow: a second counter runs kPrefetchTiles tiles ahead and
// prefetches their rows.
template <CpuCapability cap, typename in_t, typename out_t>
FIN_CPU_KERNEL void affine_strided(const in_t* in, out_t* out, const float* weight, const float* bias,
                                   const StridedLayout& layout, int64_t begin, int64_t end) {
  constexpr int kPrefetchTiles = 8;
  LayoutCounter at(layout, begin);
  const int64_t n0 = at.size[0], s0 = at.stride[0], n1 = at.size[1], s1 = at.stride[1];
  const int cd = layout.channel_dim;
  const bool prefetch = n1 > 1 && s0 == 1 && n0 * static_cast<int64_t>(sizeof(in_t)) < 64;
  LayoutCounter ahead = at;
  if (prefetch) {
    ahead.step(0, n0 - ahead.coord[0]);
    for (int k = 0; k < kPrefetchTiles; ++k) ahead.step(1, n1 - ahead.coord[1]);
  }
  for (int64_t i = begin; i < end;) {
    const int64_t c = cd < 0 ? 0 : at.coord[cd];
    if (at.coord[0] != 0 || end - i < n0) {  // a partial row
      const int64_t n = std::min(n0 - at.coord[0], end - i);
      const ChannelIn how = cd == 0 ? ChannelIn::kPerElement : ChannelIn::kFixed;
      affine_tile<cap>(in + at.offset, out + i, n, s0, 1, 0, weight + c, bias + c, how);
      i += n;
      at.step(0, n);
    } else {  // whole rows, up to the end of dim 1
      const int64_t rows = std::min(n1 - at.coord[1], (end - i) / n0);
      const ChannelIn how = cd == 0 ? ChannelIn::kPerElement : cd == 1 ? ChannelIn::kPerRow : ChannelIn::kFixed;
      if (prefetch) {
        for (int64_t r = 0; r < n1; ++r) {
          const in_t* row = in + ahead.offset + r * s1;
          __builtin_prefetch(row);
          __builtin_prefetch(row + n0 - 1);
        }
        ahead.step(1, n1);
      }
      affine_tile<cap>(in + at.offset, out + i, n0, s0, rows, s1, weight + c, bias + c, how);
      i += rows * n0;
      at.step(1, rows);
    }
  }
}

// affine_strided as a function of the capability's code of its own, for callers that reach it from several
// places (the resize's writers): inlined at each, the walker made every caller's function 100-250 KB of vector
// code, and the resize's units the longest compiles of every build.
template <CpuCapability capability, typename in_t, typename out_t>
void affine_strided_outlined(const in_t* in, out_t* out, const float* weight, const float* bias,
                             const StridedLayout& layout, int64_t begin, int64_t end) {
  on_capability<capability>(
      [&](auto cap) FIN_CPU_KERNEL_LAMBDA { affine_strided<cap>(in, out, weight, bias, layout, begin, end); });
}

template <typename in_t, typename out_t, typename Plan, typename ParallelFor>
void affine_contiguous(const in_t* in, out_t* out, const float* weight, const float* bias, const Plan& plan,
                       const ParallelFor& parallel_for) {
  const int64_t numel = plan.numel;
  const int64_t inner = plan.inner;
  const int64_t channels = plan.channels;
  const int64_t period = channels * inner;
  if (inner >= kMinRun || period > kMaxPeriod) {
    parallel_for(0, numel / inner, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
      with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
        affine_runs<cap>(in, out, weight, bias, begin, end, inner, channels);
      });
    });
    return;
  }

  const int64_t block = period * ((kMinBlock + period - 1) / period);
  std::vector<float> w_block(block), b_block(block);
  for (int64_t k = 0; k < block; ++k) {
    const int64_t c = (k / inner) % channels;
    w_block[k] = weight[c];
    b_block[k] = bias[c];
  }
  parallel_for(0, (numel + block - 1) / block, std::max<int64_t>(1, kGrain / block), [&](int64_t begin, int64_t end) {
    with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
      affine_blocks<cap>(in, out, w_block.data(), b_block.data(), begin, end, block, numel);
    });
  });
}

// The whole CPU op on checked arguments. Plan has the fields of affine.h's AffinePlan that the kernels read
// (kind, numel, channels, inner, layout, pixels); parallel_for(begin, end, grain, f) runs f(b, e) over
// chunks of [begin, end) (torch's parallel_for in the op, a loop in the test driver).
template <typename in_t, typename out_t, typename Plan, typename ParallelFor>
void affine_cpu_kernel(const in_t* in, out_t* out, const float* weight, const float* bias, const Plan& plan,
                       const ParallelFor& parallel_for) {
  switch (plan.kind) {
    case Plan::Kind::kContiguous:
      return affine_contiguous(in, out, weight, bias, plan, parallel_for);
    case Plan::Kind::kChannelsLast: {
      const ChannelsLastShape shape = plan.pixels;
      const int64_t grain = std::max<int64_t>(1, kGrain / shape.channels);
      return parallel_for(0, shape.outer * shape.pixels, grain, [&](int64_t begin, int64_t end) {
        with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
          affine_channels_last<cap>(in, out, weight, bias, shape, begin, end);
        });
      });
    }
    case Plan::Kind::kStrided:
      return parallel_for(0, plan.numel, kGrain, [&](int64_t begin, int64_t end) {
        with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
          affine_strided<cap>(in, out, weight, bias, plan.layout, begin, end);
        });
      });
  }
}

}  // namespace
}  // namespace fused_input_norm
