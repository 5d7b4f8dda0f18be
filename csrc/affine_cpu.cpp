// CPU implementation: the kernels of affine_cpu_kernels.h (vectorized by the compiler, one version per CPU
// capability: AVX-512, AVX2/FMA or baseline on x86-64, NEON on aarch64, chosen at load time), multi-threaded
// with torch's parallel_for.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <cstdint>

#include "affine.h"
#include "affine_cpu_kernels.h"
#include "dispatch.h"

namespace fused_input_norm {

namespace {

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
