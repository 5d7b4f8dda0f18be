// ATen glue shared by the CPU and CUDA implementations: argument checks and the layout the kernels see.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <optional>

#include "affine_kernel.h"

namespace fused_input_norm {

// How the kernels see a checked call: the input's elements in row-major order form [outer, channels,
// inner] with channel = (i / inner) % channels; `strided` is set when the input's memory is not in that
// order, and describes it.
struct AffinePlan {
  at::Tensor source;  // the input, or a contiguous copy of it in the rare case `strided` cannot hold it
  int64_t numel;
  int64_t channels;
  int64_t inner;
  bool contiguous;
  StridedLayout strided;
};

// The checks run before any kernel and raise a Python ValueError, TypeError, IndexError or RuntimeError
// (device mismatch) whose message names the argument and what was expected.
void check_affine_args(const char* op, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                       int64_t dim);
// affine's output dtype: out_dtype if given (checked), else float32 for integer input, else input's dtype.
at::ScalarType affine_output_dtype(const at::Tensor& input, std::optional<at::ScalarType> out_dtype);
// affine_out's `out`: device, dtype, shape, contiguity, and no partial overlap with input.
void check_out_arg(const at::Tensor& out, const at::Tensor& input);

// `input` must have passed check_affine_args.
AffinePlan plan_affine(const at::Tensor& input, int64_t dim);

// A backend's unchecked kernel launch: writes input * weight[c] + bias[c] into out.
using AffineRun = void (*)(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& bias, int64_t dim);

// The two ops for any backend, registered as &affine_op<run_affine_cpu> etc.: check everything first,
// then (allocate and) write.
template <AffineRun Run>
at::Tensor affine_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, int64_t dim,
                     std::optional<at::ScalarType> out_dtype) {
  check_affine_args("affine", input, weight, bias, dim);
  const at::ScalarType dtype = affine_output_dtype(input, out_dtype);
  at::Tensor out = at::empty(input.sizes(), input.options().dtype(dtype));
  Run(out, input, weight, bias, dim);
  return out;
}

template <AffineRun Run>
void affine_out_op(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                   int64_t dim) {
  check_affine_args("affine_out", input, weight, bias, dim);
  check_out_arg(out, input);
  Run(out, input, weight, bias, dim);
}

}  // namespace fused_input_norm
