// ATen glue shared by the CPU and CUDA implementations: argument checks and the layout the kernels see.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <optional>

#include "affine_kernel.h"

namespace fused_input_norm {

// How the kernels see a checked call. The output is contiguous with input's shape. `kind` picks the kernel:
// kContiguous: the input is contiguous too, its elements form [outer, channels, inner] with channel =
//   (i / inner) % channels (inner = numel when there is one channel);
// kChannelsLast: the input is channels-last [outer, pixels, C] read as [outer, C, pixels] (HWC -> CHW);
// kStrided: anything else, described by `layout`.
struct AffinePlan {
  enum class Kind { kContiguous, kChannelsLast, kStrided };
  at::Tensor source;  // the input, or a contiguous copy of it in the rare case `layout` cannot hold it
  Kind kind;
  int64_t numel;
  int64_t channels;
  int64_t inner;
  StridedLayout layout;      // kChannelsLast and kStrided
  ChannelsLastShape pixels;  // kChannelsLast
};

// The checks run before any kernel and raise a Python ValueError, TypeError, IndexError or RuntimeError
// (device mismatch) whose message names the argument and what was expected.
void check_affine_args(const char* op, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                       int64_t dim);
// affine's output dtype: out_dtype if given (checked), else float32 for integer input, else input's dtype.
at::ScalarType affine_output_dtype(const at::Tensor& input, std::optional<at::ScalarType> out_dtype);
// affine_out's `out`: device, dtype, shape, contiguity, no partial overlap with input, no overlap with
// weight or bias.
void check_out_arg(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias);

// `input` must have passed check_affine_args.
AffinePlan plan_affine(const at::Tensor& input, int64_t dim);

// A backend's unchecked kernel launch: writes input * weight[c] + bias[c] into out.
using AffineRun = void (*)(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& bias, int64_t dim);

// A backend's preparation of a freshly allocated output before the kernel first touches it.
using PrepareOutput = void (*)(const at::Tensor& out);
inline void leave_output_as_is(const at::Tensor&) {}

// The two ops for any backend, registered as &affine_op<run_affine_cpu> etc.: check everything first,
// then (allocate and) write.
template <AffineRun Run, PrepareOutput Prepare = leave_output_as_is>
at::Tensor affine_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, int64_t dim,
                     std::optional<at::ScalarType> out_dtype) {
  check_affine_args("affine", input, weight, bias, dim);
  const at::ScalarType dtype = affine_output_dtype(input, out_dtype);
  at::Tensor out = at::empty(input.sizes(), input.options().dtype(dtype));
  Prepare(out);
  Run(out, input, weight, bias, dim);
  return out;
}

template <AffineRun Run>
void affine_out_op(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                   int64_t dim) {
  check_affine_args("affine_out", input, weight, bias, dim);
  check_out_arg(out, input, weight, bias);
  Run(out, input, weight, bias, dim);
}

}  // namespace fused_input_norm
