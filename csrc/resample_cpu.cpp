// The resize op on the CPU: each call runs the resize compiled for this process's CPU capability
// (resample_cpu_bands.h, one translation unit per capability).
#include <torch/csrc/stable/library.h>

#include "cpu_capability.h"
#include "resample.h"

namespace fused_input_norm {
namespace {

void run_resize_cpu(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const ResizePlan& plan) {
  select_cpu_capability([&](auto cap) { run_resize_cpu_with<decltype(cap)::value>(out, input, weight, bias, plan); });
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CPU, m) {
  m.impl("resize_affine_out", TORCH_BOX(&resize_affine_out_op<run_resize_cpu>));
}

}  // namespace fused_input_norm
