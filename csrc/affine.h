// Glue shared by the CPU and CUDA implementations, on the LibTorch stable ABI: argument checks, the
// layout the kernels see, and the two ops for any backend.
#pragma once

#include <optional>

#include "glue.h"
#include "strided_layout.h"

namespace fused_input_norm {

// How the kernels see a checked call. The output is contiguous with input's shape. `kind` picks the kernel:
// kContiguous: the input is contiguous too, its elements form [outer, channels, inner] with channel =
//   (i / inner) % channels (inner = numel when there is one channel);
// kChannelsLast: the input is channels-last [outer, pixels, C] read as [outer, C, pixels] (HWC -> CHW);
// kStrided: anything else, described by `layout`.
struct AffinePlan {
  enum class Kind { kContiguous, kChannelsLast, kStrided };
  Tensor source;  // the input, or a contiguous copy of it in the rare case `layout` cannot hold it
  Kind kind;
  int64_t numel;
  int64_t channels;
  int64_t inner;
  StridedLayout layout;      // kChannelsLast and kStrided
  ChannelsLastShape pixels;  // kChannelsLast
};

// The checks run before any kernel and fail (see ArgError) with a message that names the argument and
// what was expected.
void check_affine_args(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t dim);
// affine's output dtype: out_dtype if given (checked), else float32 for integer input, else input's dtype.
ScalarType affine_output_dtype(const Tensor& input, std::optional<ScalarType> out_dtype);
// affine_out's `out`: device, dtype, shape, contiguity, no partial overlap with input, no overlap with
// weight or bias.
void check_out_arg(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias);

// `input` must have passed check_affine_args.
AffinePlan plan_affine(const Tensor& input, int64_t dim);

// A new contiguous tensor with input's shape and device; dtype is float16, bfloat16 or float32.
Tensor new_output(const Tensor& input, ScalarType dtype);

// A backend's unchecked kernel launch: writes input * weight[c] + bias[c] into out.
using AffineRun = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           int64_t dim);

// The two ops for any backend, registered as TORCH_BOX(&affine_op<run_affine_cpu>) etc.: check everything
// first, then (allocate and) write.
template <AffineRun Run, PrepareOutput Prepare = leave_output_as_is>
Tensor affine_op(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t dim,
                 std::optional<ScalarType> out_dtype) {
  check_affine_args("affine", input, weight, bias, dim);
  const ScalarType dtype = affine_output_dtype(input, out_dtype);
  Tensor out = new_output(input, dtype);
  Prepare(out);
  Run(out, input, weight, bias, dim);
  return out;
}

template <AffineRun Run>
void affine_out_op(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t dim) {
  check_affine_args("affine_out", input, weight, bias, dim);
  check_out_arg(out, input, weight, bias);
  Run(out, input, weight, bias, dim);
}

}  // namespace fused_input_norm
