// CPU implementation: multi-threaded with at::parallel_for, and vectorized by the compiler on the
// contiguous path, with AVX-512 and AVX2/FMA clones chosen at load time on x86-64.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FIN_X86 1
#endif

#include "affine.h"
#include "dispatch.h"

// The inner loops are compiled three times on x86-64, for the baseline ISA, x86-64-v3 (AVX2, FMA, F16C)
// and x86-64-v4 (AVX-512); the loader picks one. The kernel math is header-inline, so each clone gets
// its own vector code.
#if defined(FIN_X86)
#define FIN_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), noinline))
#else
#define FIN_CPU_CLONES
#endif

namespace fused_input_norm {
namespace {

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
// on x86 with F16C (every x86-64-v3 CPU) the conversion is the hardware's, which also rounds to nearest
// even: the same bits.
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

void floats_to_half(const float* src, half_bits* dst, int64_t n) {
#if defined(FIN_X86)
  static const bool has_f16c = __builtin_cpu_supports("f16c");
  if (has_f16c) return floats_to_half_f16c(src, dst, n);
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

// y[0, n) = x * weight + bias: one loop the compiler vectorizes; float16 output goes through a small
// float buffer and floats_to_half.
template <typename in_t, typename out_t, typename Params>
inline __attribute__((always_inline)) void affine_stretch(const in_t* x, out_t* y, int64_t n, Params p) {
  if constexpr (std::is_same_v<out_t, half_bits>) {
    constexpr int64_t kChunk = 256;
    float buffer[kChunk];
    for (int64_t s = 0; s < n; s += kChunk) {
      const int64_t m = std::min(kChunk, n - s);
      for (int64_t j = 0; j < m; ++j) buffer[j] = affine(to_float(x[s + j]), p.weight(s + j), p.bias(s + j));
      floats_to_half(buffer, y + s, m);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = from_float<out_t>(affine(to_float(x[j]), p.weight(j), p.bias(j)));
  }
}

// Runs [begin, end) of a contiguous [outer, channels, inner] input whose channel runs are long, one run
// at a time. One call per parallel chunk, so the clone dispatch and the loop set-up are not paid per run.
template <typename in_t, typename out_t>
FIN_CPU_CLONES void affine_runs(const in_t* in, out_t* out, const float* weight, const float* bias, int64_t run_begin,
                                int64_t run_end, int64_t inner, int64_t channels) {
  for (int64_t r = run_begin; r < run_end; ++r) {
    const int64_t c = r % channels;
    affine_stretch(in + r * inner, out + r * inner, inner, RunParams{weight[c], bias[c]});
  }
}

// Blocks [begin, end) of `block` elements each, every block starting at channel phase 0 and using the
// unrolled per-element weight/bias pattern of one block.
template <typename in_t, typename out_t>
FIN_CPU_CLONES void affine_blocks(const in_t* in, out_t* out, const float* w_block, const float* b_block,
                                  int64_t block_begin, int64_t block_end, int64_t block, int64_t numel) {
  for (int64_t k = block_begin; k < block_end; ++k) {
    const int64_t start = k * block;
    affine_stretch(in + start, out + start, std::min(block, numel - start), PatternParams{w_block, b_block});
  }
}

template <typename in_t, typename out_t>
void affine_cpu_kernel(const in_t* in, out_t* out, const float* weight, const float* bias, const AffinePlan& plan) {
  const int64_t numel = plan.numel;
  const int64_t inner = plan.inner;
  const int64_t channels = plan.channels;

  if (!plan.contiguous) {
    at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) affine_strided_element(in, out, weight, bias, plan.strided, i);
    });
    return;
  }

  const int64_t period = channels * inner;
  if (inner >= kMinRun || period > kMaxPeriod) {
    at::parallel_for(0, numel / inner, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
      affine_runs(in, out, weight, bias, begin, end, inner, channels);
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
  at::parallel_for(0, (numel + block - 1) / block, std::max<int64_t>(1, kGrain / block),
                   [&](int64_t begin, int64_t end) {
                     affine_blocks(in, out, w_block.data(), b_block.data(), begin, end, block, numel);
                   });
}

void run_affine_cpu(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                    int64_t dim) {
  const AffinePlan plan = plan_affine(input, dim);
  if (plan.numel == 0) return;
  FIN_DISPATCH_IN_OUT(plan.source.scalar_type(), out.scalar_type(), [&] {
    affine_cpu_kernel(static_cast<const in_t*>(plan.source.const_data_ptr()), static_cast<out_t*>(out.data_ptr()),
                      weight.const_data_ptr<float>(), bias.const_data_ptr<float>(), plan);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_input_norm, CPU, m) {
  m.impl("affine", &affine_op<run_affine_cpu>);
  m.impl("affine_out", &affine_out_op<run_affine_cpu>);
}

}  // namespace fused_input_norm
