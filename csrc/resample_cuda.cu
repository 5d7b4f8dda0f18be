// The resize op on CUDA (and ROCm through hipify). With two passes, the first writes its uint8 rows (float32
// for the cv2 filters and torch's float32 antialiased ones) to a workspace from torch's caching allocator (the only
// intermediate); the second pass runs inside the affine's strided kernel as its source (ResampledSource), so each
// output element is resampled (or, outside the crop's box on a padded canvas, the fill), normalized and stored in its
// layout by one thread. No host sync, no allocation but
// the output and that workspace (and pitched strips' rows, written before their 2-D copy): capturable in a CUDA
// graph.
#include <cuda_runtime.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>

#include <cstdint>
#include <limits>

#include "affine_kernel.h"
#include "cuda_launch.h"
#include "dispatch.h"
#include "resample.h"

namespace fused_input_norm {
namespace {

template <typename index_t>
void launch_resize(const Tensor& out, const ResizePlan& p, const ResamplePass& last, const float* w, const float* b,
                   int device, cudaStream_t stream) {
  const ResampledSource<index_t> source(p, last);
  const auto calc = make_offset_calculator<index_t>(p.layout);
  FIN_DISPATCH_RESIZE_OUT(out.scalar_type(), [&] {
    (void)sizeof(in_t);
    launch<affine_strided_source_kernel<ResampledSource<index_t>, out_t, index_t>>(
        p.numel / kStridedRun + 1, device, stream, source, static_cast<out_t*>(out.mutable_data_ptr()), w, b,
        static_cast<index_t>(p.numel), calc);
  });
}

void run_resize_cuda(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const ResizePlan& p) {
  const int device = input.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  const auto* in = static_cast<const uint8_t*>(input.const_data_ptr());
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

  const uint8_t* src = in;
  std::array<int64_t, 4> strides = p.strides;
  Tensor workspace;
  const float* first_rows = nullptr;  // the float32 intermediate (cv2 filters, torch's float32 antialiased ones)
  if (p.two_passes() && (is_cv2(p.filter) || is_aa_f32(p.filter))) {
    const auto [rows, cols] = intermediate_shape(p);
    const int64_t sizes[4] = {p.batch, p.channels, rows, cols};
    workspace = new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef(sizes, 4), ScalarType::Float, input);
    auto* ws = static_cast<float*>(workspace.mutable_data_ptr());
    const int64_t n = p.batch * p.channels * rows * cols;
    const ResamplePass first = first_pass(p, in);
    if (n <= kMax32) {
      launch<float_first_pass_kernel<uint32_t>>(n, device, stream, first, ws, static_cast<uint32_t>(p.channels),
                                                static_cast<uint32_t>(rows), static_cast<uint32_t>(cols),
                                                static_cast<uint32_t>(n));
    } else {
      launch<float_first_pass_kernel<uint64_t>>(n, device, stream, first, ws, static_cast<uint64_t>(p.channels),
                                                static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                                static_cast<uint64_t>(n));
    }
    first_rows = ws;
    strides = {p.channels * rows * cols, rows * cols, cols, 1};
  } else if (p.two_passes()) {
    const auto [rows, cols] = intermediate_shape(p);
    const int64_t sizes[4] = {p.batch, p.channels, rows, cols};
    workspace = new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef(sizes, 4), ScalarType::Byte, input);
    auto* ws = static_cast<uint8_t*>(workspace.mutable_data_ptr());
    const int64_t n = p.batch * p.channels * rows * cols;
    const ResamplePass first = first_pass(p, in);
    if (n <= kMax32) {
      launch<resample_pass_kernel<uint32_t>>(n, device, stream, first, ws, static_cast<uint32_t>(p.channels),
                                             static_cast<uint32_t>(rows), static_cast<uint32_t>(cols),
                                             static_cast<uint32_t>(n));
    } else {
      launch<resample_pass_kernel<uint64_t>>(n, device, stream, first, ws, static_cast<uint64_t>(p.channels),
                                             static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                             static_cast<uint64_t>(n));
    }
    src = ws;
    strides = {p.channels * rows * cols, rows * cols, cols, 1};
  }
  const ResamplePass last = is_linear_f32(p.filter) ? linear_f32_pass(p, input.const_data_ptr())
                            : first_rows != nullptr ? float_rows_last_pass(p, first_rows, strides)
                                                    : last_pass(p, src, strides);
  const auto* w = static_cast<const float*>(weight.const_data_ptr());
  const auto* b = static_cast<const float*>(bias.const_data_ptr());
  // Strips into a window of wider strips (their C * P rows out_pitch values apart): the kernel writes them
  // contiguous, in its output order, and one 2-D copy on the stream places the rows (a device-to-device copy at
  // memory speed; the CPU writes each row in place).
  const int64_t strip_rows = p.channels * p.patch;
  const bool pitched = p.patch > 0 && p.patch_layout == PatchLayout::kStrips && p.out_pitch * strip_rows != p.numel;
  Tensor dest = out;
  if (pitched) dest = new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef(&p.numel, 1), out.scalar_type(), out);
  // The walker's offsets index the virtual [B, C, canvas_h, canvas_w] image; the output may be T times larger.
  const int64_t resampled = p.batch * p.channels * p.canvas_h * p.canvas_w;
  if (p.numel <= kMax32 && resampled <= kMax32) {
    launch_resize<uint32_t>(dest, p, last, w, b, device, stream);
  } else {
    launch_resize<uint64_t>(dest, p, last, w, b, device, stream);
  }
  if (pitched) {
    const auto bytes = static_cast<size_t>(out.element_size());
    const auto length = static_cast<size_t>(p.numel / strip_rows);
    FIN_CUDA_CHECK(cudaMemcpy2DAsync(out.mutable_data_ptr(), static_cast<size_t>(p.out_pitch) * bytes,
                                     dest.const_data_ptr(), length * bytes, length * bytes,
                                     static_cast<size_t>(strip_rows), cudaMemcpyDeviceToDevice, stream));
  }
  // The workspace goes back to the caching allocator on this stream: later work on the stream is ordered
  // after the kernels that read it.
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CUDA, m) {
  m.impl("resize_affine_out", TORCH_BOX(&resize_affine_out_op<run_resize_cuda>));
}

}  // namespace fused_input_norm
