// The resize op's glue (definitions in resample.cpp): argument checks, and the plan both backends' kernels
// follow. The op resamples a uint8 [B, C, H, W] image (any strides) exactly as Pillow or torch does, crops,
// applies the affine and writes the output layout, in one call:
//   planar:  out [B, C, crop_h, crop_w]
//   patches: out [B * (crop_h / P) * (crop_w / P), C * T * P * P], Qwen-VL's patch rows of each image, the
//            one resampled frame repeated T times (patches = [T, P, merge]).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "glue.h"
#include "resample_kernel.h"
#include "strided_layout.h"

namespace fused_input_norm {

struct ResizePlan {
  int64_t batch, channels, in_h, in_w;
  int64_t out_h, out_w;                         // the resampled image (before the crop)
  int64_t top, left, crop_h, crop_w;            // the crop, inside the resampled image
  std::array<int64_t, 4> strides;               // input's, in elements: b, c, h, w
  const int32_t* row_plan;                      // vertical pass coefficients, nullptr when out_h == in_h
  const int32_t* col_plan;                      // horizontal pass coefficients, nullptr when out_w == in_w
  bool vertical_first;                          // both passes: which comes first
  ResampleFilter filter;
  int64_t temporal, patch, merge;               // patch == 0: planar output
  StridedLayout layout;                         // output order -> offsets into the virtual [B, C, crop_h, crop_w]
  int64_t numel;                                // of the output
  // The input rows (horizontal first) or columns (vertical first) the first pass must produce for the crop:
  // [first_begin, first_end). Unused with one pass.
  int64_t first_begin, first_end;

  bool two_passes() const { return row_plan != nullptr && col_plan != nullptr; }
};

// Checks every argument (nothing is written on failure) and builds the plan.
ResizePlan plan_resize(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const std::optional<Tensor>& row_plan, const std::optional<Tensor>& col_plan,
                       const std::vector<int64_t>& size, const std::vector<int64_t>& crop, const std::string& filter,
                       bool vertical_first, const std::vector<int64_t>& patches);

// The first input index and count of the taps of output index i: the planner's own bounds, for the host
// to size the first pass without reading a plan that may live on the device.
std::array<int64_t, 2> resample_bounds(int64_t in_size, int64_t out_size, ResampleFilter filter, int64_t i);

// The pass that produces element (b, c, i, j) of the crop from `src`: the last pass, or the only one.
// `src_strides`: b, c, row, col of the image the pass reads (the input, or the first pass's intermediate
// [B, C, rows, cols] whose first row/col is input index `first_begin`).
ResamplePass last_pass(const ResizePlan& plan, const uint8_t* src, const std::array<int64_t, 4>& src_strides,
                       bool reads_intermediate);
// The first of two passes: element (b, c, i, j) of the intermediate.
ResamplePass first_pass(const ResizePlan& plan, const uint8_t* input);
// The intermediate's rows and columns.
std::array<int64_t, 2> intermediate_shape(const ResizePlan& plan);

using ResizeRun = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const ResizePlan& plan);

template <ResizeRun Run>
void resize_affine_out_op(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                          std::optional<Tensor> row_plan, std::optional<Tensor> col_plan, std::vector<int64_t> size,
                          std::vector<int64_t> crop, std::string filter, bool vertical_first,
                          std::vector<int64_t> patches) {
  const ResizePlan plan =
      plan_resize(out, input, weight, bias, row_plan, col_plan, size, crop, filter, vertical_first, patches);
  if (plan.numel == 0) return;
  Run(out, input, weight, bias, plan);
}

}  // namespace fused_input_norm
