// The affine ops' glue: argument checks and the plan the kernels see (declared in affine.h).
#include "affine.h"

#include <utility>

namespace fused_input_norm {
namespace {

bool is_input_dtype(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::UInt16 || t == ScalarType::Half || t == ScalarType::BFloat16 ||
         t == ScalarType::Float;
}

constexpr const char* kInputDtypes = "torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32";

// True when out and input touch some common bytes without being the very same elements: an exact alias
// (same address, element size, and strides on every dim of size > 1, whose strides are the only ones that
// address anything; the shapes are already equal) is an in-place call.
bool shares_memory_partially(const Tensor& out, const Tensor& input) {
  if (!may_overlap(out, input)) return false;
  if (out.const_data_ptr() != input.const_data_ptr() || out.element_size() != input.element_size()) return true;
  const auto sizes = out.sizes(), out_strides = out.strides(), input_strides = input.strides();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && out_strides[d] != input_strides[d]) return true;
  }
  return false;
}

int64_t wrap_dim(int64_t dim, int64_t ndim) { return dim < 0 ? dim + ndim : dim; }

}  // namespace

void check_affine_args(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t dim) {
  check_defined(op, "input", input);
  check_defined(op, "weight", weight);
  check_defined(op, "bias", bias);
  if (const ScalarType dtype = input.scalar_type(); !is_input_dtype(dtype)) {
    fail(ArgError::kType, "fused_input_norm.", op, ": input must have one of the dtypes ", kInputDtypes, ", got ",
         py_dtype(dtype));
  }
  const int64_t ndim = input.dim();
  if (ndim < 1) {
    fail(ArgError::kValue, "fused_input_norm.", op,
         ": input must have at least 1 dimension (the channel axis), got a 0-d tensor");
  }
  if (dim < -ndim || dim >= ndim) {
    fail(ArgError::kIndex, "fused_input_norm.", op, ": dim must be in [", -ndim, ", ", ndim - 1, "] for a ", ndim,
         "-D input, got ", dim);
  }
  const int64_t channels = input.size(wrap_dim(dim, ndim));
  const torch::stable::Device device = input.device();
  check_channel_vector(op, "weight", weight, device, dim, channels);
  check_channel_vector(op, "bias", bias, device, dim, channels);
}

ScalarType affine_output_dtype(const Tensor& input, std::optional<ScalarType> out_dtype) {
  if (!out_dtype.has_value()) {
    const ScalarType in = input.scalar_type();
    return in == ScalarType::Half || in == ScalarType::BFloat16 || in == ScalarType::Float ? in : ScalarType::Float;
  }
  if (!is_output_dtype(*out_dtype)) {
    fail(ArgError::kType, "fused_input_norm.affine: out_dtype must be one of ", kOutputDtypes, ", got ",
         py_dtype(*out_dtype));
  }
  return *out_dtype;
}

void check_out_arg(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_defined("affine_out", "out", out);
  if (const torch::stable::Device device = input.device(), out_device = out.device(); out_device != device) {
    fail(ArgError::kRuntime, "fused_input_norm.affine_out: out must be on input's device ", device_name(device),
         ", got ", device_name(out_device));
  }
  if (const ScalarType dtype = out.scalar_type(); !is_output_dtype(dtype)) {
    fail(ArgError::kType, "fused_input_norm.affine_out: out must have one of the dtypes ", kOutputDtypes, ", got ",
         py_dtype(dtype));
  }
  if (!out.sizes().equals(input.sizes())) {
    fail(ArgError::kValue, "fused_input_norm.affine_out: out must have input's shape ", int_list(input.sizes()),
         ", got ", int_list(out.sizes()));
  }
  if (!out.is_contiguous()) {
    fail(ArgError::kValue, "fused_input_norm.affine_out: out must be contiguous, got stride ", int_list(out.strides()));
  }
  if (shares_memory_partially(out, input)) {
    fail(ArgError::kValue,
         "fused_input_norm.affine_out: out partially overlaps input; pass out=input exactly to normalize in place, "
         "or a separate buffer");
  }
  // Every thread reads weight/bias while others write out: they must not share memory with out.
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"weight", weight}, {"bias", bias}}) {
    if (may_overlap(out, t)) {
      fail(ArgError::kValue, "fused_input_norm.affine_out: out overlaps ", name, "; pass a separate output buffer");
    }
  }
}

AffinePlan plan_affine(const Tensor& input, int64_t dim) {
  AffinePlan plan{input};
  const int64_t wrapped = wrap_dim(dim, input.dim());
  plan.numel = input.numel();
  plan.channels = input.size(wrapped);
  if (!input.is_contiguous()) {
    if (build_strided_layout(static_cast<int>(input.dim()), input.sizes().data(), input.strides().data(),
                             static_cast<int>(wrapped), &plan.layout)) {
      plan.kind =
          as_channels_last(plan.layout, &plan.pixels) ? AffinePlan::Kind::kChannelsLast : AffinePlan::Kind::kStrided;
      return plan;
    }
    // More than kMaxDims dims survive merging: rare enough to pay for a contiguous copy.
    plan.source = torch::stable::contiguous(input);
  }
  plan.kind = AffinePlan::Kind::kContiguous;
  plan.inner = 1;
  for (int64_t d = wrapped + 1; d < input.dim(); ++d) plan.inner *= input.size(d);
  if (plan.channels == 1) plan.inner = plan.numel;  // one channel: the whole tensor is one run
  return plan;
}

Tensor new_output(const Tensor& input, ScalarType dtype) { return new_contiguous(input.sizes(), dtype, input); }

}  // namespace fused_input_norm
