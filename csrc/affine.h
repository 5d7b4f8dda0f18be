// Glue shared by the CPU and CUDA implementations, on the LibTorch stable ABI: argument checks, the
// layout the kernels see, and the two ops for any backend.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "affine_kernel.h"

// Without it the stable headers target the torch that builds the extension, and the library would not
// load on an older one. setup.py and CMakeLists.txt set it.
#if !defined(TORCH_TARGET_VERSION)
#error "build with -DTORCH_TARGET_VERSION=<the oldest torch the extension supports> (see setup.py)"
#endif

namespace fused_input_norm {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The stable ABI can raise only RuntimeError. A failed check therefore starts its message with the Python
// exception it stands for, "[ValueError] fused_input_norm.affine: ...", and the Python wrappers
// (fused_input_norm/ops.py) raise that type with the rest of the message; a direct torch.ops call sees a
// RuntimeError with the whole message. Device mismatches are plain RuntimeErrors.
enum class ArgError { kValue, kType, kIndex, kRuntime };

[[noreturn]] void throw_arg_error(ArgError kind, const std::string& message);

template <typename... Args>
[[noreturn]] void fail(ArgError kind, const Args&... args) {
  std::ostringstream message;
  (message << ... << args);
  throw_arg_error(kind, message.str());
}

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

// A backend's preparation of a freshly allocated output before the kernel first touches it.
using PrepareOutput = void (*)(const Tensor& out);
inline void leave_output_as_is(const Tensor&) {}

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
