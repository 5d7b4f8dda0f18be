// The resize op's glue (definitions in resample.cpp): the argument checks, then the torch-free plan of
// resample_kernel.h that both backends' kernels (and the host emulation) follow.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "cpu_capability.h"
#include "glue.h"
#include "resample_kernel.h"
#include "strided_layout.h"

namespace fused_input_norm {

// Checks every argument (nothing is written on failure) and builds the plan.
ResizePlan plan_resize(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const std::optional<Tensor>& row_plan, const std::optional<Tensor>& col_plan,
                       const std::vector<int64_t>& size, const std::vector<int64_t>& crop, const std::string& filter,
                       bool vertical_first, const std::vector<int64_t>& patches, bool clip,
                       const std::vector<int64_t>& pad);

using ResizeRun = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const ResizePlan& plan);

// The CPU resize with one capability's kernels (resample_cpu_bands.h), defined in that capability's own unit,
// resample_cpu_<capability>.cpp.
template <CpuCapability capability>
void run_resize_cpu_with(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const ResizePlan& plan);

template <ResizeRun Run>
void resize_affine_out_op(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                          std::optional<Tensor> row_plan, std::optional<Tensor> col_plan, std::vector<int64_t> size,
                          std::vector<int64_t> crop, std::string filter, bool vertical_first,
                          std::vector<int64_t> patches, bool clip, std::vector<int64_t> pad) {
  const ResizePlan plan =
      plan_resize(out, input, weight, bias, row_plan, col_plan, size, crop, filter, vertical_first, patches, clip, pad);
  if (plan.numel == 0) return;
  Run(out, input, weight, bias, plan);
}

}  // namespace fused_input_norm
