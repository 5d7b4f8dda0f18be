// CPU implementation: multi-threaded with at::parallel_for, and vectorized by the compiler on the
// contiguous path, with an AVX2/FMA clone chosen at load time on x86-64.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "affine.h"
#include "dispatch.h"

// The inner loops are compiled twice on x86-64, for the baseline ISA and for x86-64-v3 (AVX2, FMA,
// F16C); the loader picks one. The kernel math is header-inline, so each clone gets its own vector code.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
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

// Runs [begin, end) of a contiguous [outer, channels, inner] input whose channel runs are long: each run
// is one vectorized loop with a scalar weight and bias. One call per parallel chunk, so the clone
// dispatch and the loop set-up are not paid per run.
template <typename in_t, typename out_t>
FIN_CPU_CLONES void affine_runs(const in_t* in, out_t* out, const float* weight, const float* bias, int64_t run_begin,
                                int64_t run_end, int64_t inner, int64_t channels) {
  for (int64_t r = run_begin; r < run_end; ++r) {
    const float w = weight[r % channels];
    const float b = bias[r % channels];
    const in_t* x = in + r * inner;
    out_t* y = out + r * inner;
    for (int64_t k = 0; k < inner; ++k) y[k] = from_float<out_t>(affine(to_float(x[k]), w, b));
  }
}

// Runs blocks [begin, end) of `block` elements each, every block starting at channel phase 0 and using the
// unrolled per-element weight/bias pattern of one block.
template <typename in_t, typename out_t>
FIN_CPU_CLONES void affine_blocks(const in_t* in, out_t* out, const float* w_block, const float* b_block,
                                  int64_t block_begin, int64_t block_end, int64_t block, int64_t numel) {
  for (int64_t k = block_begin; k < block_end; ++k) {
    const int64_t start = k * block;
    const int64_t n = std::min(block, numel - start);
    const in_t* x = in + start;
    out_t* y = out + start;
    for (int64_t j = 0; j < n; ++j) y[j] = from_float<out_t>(affine(to_float(x[j]), w_block[j], b_block[j]));
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
