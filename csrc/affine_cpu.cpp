// CPU implementation: the kernels of affine_cpu_kernels.h (vectorized by the compiler, one version per CPU
// capability: AVX-512, AVX2/FMA or baseline on x86-64, NEON on aarch64, chosen at load time), multi-threaded
// with torch's parallel_for.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "affine.h"
#include "affine_cpu_kernels.h"
#include "dispatch.h"

namespace fused_input_norm {

namespace {

// A fresh output of several huge pages gets transparent huge pages before the kernel first touches it:
// first-touch faults of 4 KiB pages otherwise cost several times the kernel itself (a 165 MB output: ~100
// ms of faults against ~15 ms of work). madvise is advice: an error or a kernel without THP changes nothing.
void advise_huge_pages(const Tensor& out) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto nbytes = static_cast<uintptr_t>(out.numel()) * out.element_size();
  if (nbytes < 4 * kHugePage) return;
  const auto begin = reinterpret_cast<uintptr_t>(out.mutable_data_ptr());
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (begin + nbytes) & ~(kHugePage - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)out;
#endif
}

void run_affine_cpu(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t dim) {
  const AffinePlan plan = plan_affine(input, dim);
  if (plan.numel == 0) return;
  FIN_DISPATCH_IN_OUT(plan.source.scalar_type(), out.scalar_type(), [&] {
    affine_cpu_kernel(static_cast<const in_t*>(plan.source.const_data_ptr()),
                      static_cast<out_t*>(out.mutable_data_ptr()), static_cast<const float*>(weight.const_data_ptr()),
                      static_cast<const float*>(bias.const_data_ptr()), plan,
                      [](int64_t begin, int64_t end, int64_t grain, const auto& f) {
                        torch::stable::parallel_for(begin, end, grain, f);
                      });
  });
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CPU, m) {
  m.impl("affine", TORCH_BOX((&affine_op<run_affine_cpu, advise_huge_pages>)));
  m.impl("affine_out", TORCH_BOX(&affine_out_op<run_affine_cpu>));
}

}  // namespace fused_input_norm
