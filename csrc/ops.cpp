// Schemas of every fused_input_norm op, the checks both backends share, and the Python module stub.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#if defined(FIN_PYTHON_MODULE)
#include <Python.h>
#endif
#include <torch/library.h>

#include <sstream>
#include <string>

#include "affine.h"

namespace fused_input_norm {

#if defined(FIN_WITH_GPU)
// affine_cuda.cu: the GPU backend's name ("cuda" or "hip") and its JSON fields (toolkit version, archs).
const char* gpu_backend_name();
std::string gpu_build_fields();
#endif

namespace {

// Python spellings, since the messages surface as Python exceptions.
std::string py_dtype(at::ScalarType t) {
  switch (t) {
    case at::kByte:
      return "torch.uint8";
    case at::kChar:
      return "torch.int8";
    case at::kShort:
      return "torch.int16";
    case at::kInt:
      return "torch.int32";
    case at::kLong:
      return "torch.int64";
    case at::kUInt16:
      return "torch.uint16";
    case at::kUInt32:
      return "torch.uint32";
    case at::kUInt64:
      return "torch.uint64";
    case at::kHalf:
      return "torch.float16";
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kBool:
      return "torch.bool";
    case at::kComplexFloat:
      return "torch.complex64";
    case at::kComplexDouble:
      return "torch.complex128";
    default:
      return std::string("torch.") + c10::toString(t);
  }
}

bool is_input_dtype(at::ScalarType t) {
  return t == at::kByte || t == at::kUInt16 || t == at::kHalf || t == at::kBFloat16 || t == at::kFloat;
}

bool is_output_dtype(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

constexpr const char* kInputDtypes = "torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32";
constexpr const char* kOutputDtypes = "torch.float16, torch.bfloat16, torch.float32";

void check_channel_vector(const char* op, const char* name, const at::Tensor& t, const at::Tensor& input, int64_t dim,
                          int64_t channels) {
  TORCH_CHECK(t.device() == input.device(), "fused_input_norm.", op, ": ", name, " must be on input's device ",
              input.device(), ", got ", t.device());
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "fused_input_norm.", op, ": ", name,
                   " must be a float32 tensor, got ", py_dtype(t.scalar_type()));
  TORCH_CHECK_VALUE(t.dim() == 1, "fused_input_norm.", op, ": ", name, " must be 1-D (one value per channel), got ",
                    t.dim(), "-D shape ", t.sizes());
  TORCH_CHECK_VALUE(t.size(0) == channels, "fused_input_norm.", op, ": ", name,
                    " must have one value per channel: length input.size(", dim, ") = ", channels, ", got ", t.size(0));
  TORCH_CHECK_VALUE(t.is_contiguous(), "fused_input_norm.", op, ": ", name, " must be contiguous, got stride ",
                    t.strides());
}

// The bytes a tensor's elements span, [begin, end).
std::pair<uintptr_t, uintptr_t> byte_range(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  return {begin, begin + (last + 1) * t.element_size()};
}

// True when a and b may touch common bytes: same allocation and intersecting byte ranges.
bool may_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.storage().is_alias_of(b.storage())) return false;
  const auto [a_begin, a_end] = byte_range(a);
  const auto [b_begin, b_end] = byte_range(b);
  return a_begin < b_end && b_begin < a_end;
}

// True when out and input touch some common bytes without being the very same elements (an exact alias is
// an in-place call). get_overlap_status alone answers TooHard for any strided input, even one in another
// allocation, hence the byte ranges first.
bool shares_memory_partially(const at::Tensor& out, const at::Tensor& input) {
  return may_overlap(out, input) && at::get_overlap_status(out, input) != at::MemOverlapStatus::Full;
}

}  // namespace

void check_affine_args(const char* op, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                       int64_t dim) {
  TORCH_CHECK_TYPE(is_input_dtype(input.scalar_type()), "fused_input_norm.", op, ": input must have one of the dtypes ",
                   kInputDtypes, ", got ", py_dtype(input.scalar_type()));
  TORCH_CHECK_VALUE(input.dim() >= 1, "fused_input_norm.", op,
                    ": input must have at least 1 dimension (the channel axis), got a 0-d tensor");
  TORCH_CHECK_INDEX(dim >= -input.dim() && dim < input.dim(), "fused_input_norm.", op, ": dim must be in [",
                    -input.dim(), ", ", input.dim() - 1, "] for a ", input.dim(), "-D input, got ", dim);
  const int64_t wrapped = at::maybe_wrap_dim(dim, input.dim());
  const int64_t channels = input.size(wrapped);
  check_channel_vector(op, "weight", weight, input, dim, channels);
  check_channel_vector(op, "bias", bias, input, dim, channels);
}

at::ScalarType affine_output_dtype(const at::Tensor& input, std::optional<at::ScalarType> out_dtype) {
  if (!out_dtype.has_value()) {
    return at::isFloatingType(input.scalar_type()) ? input.scalar_type() : at::kFloat;
  }
  TORCH_CHECK_TYPE(is_output_dtype(*out_dtype), "fused_input_norm.affine: out_dtype must be one of ", kOutputDtypes,
                   ", got ", py_dtype(*out_dtype));
  return *out_dtype;
}

void check_out_arg(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(out.device() == input.device(), "fused_input_norm.affine_out: out must be on input's device ",
              input.device(), ", got ", out.device());
  TORCH_CHECK_TYPE(is_output_dtype(out.scalar_type()), "fused_input_norm.affine_out: out must have one of the dtypes ",
                   kOutputDtypes, ", got ", py_dtype(out.scalar_type()));
  TORCH_CHECK_VALUE(out.sizes() == input.sizes(), "fused_input_norm.affine_out: out must have input's shape ",
                    input.sizes(), ", got ", out.sizes());
  TORCH_CHECK_VALUE(out.is_contiguous(), "fused_input_norm.affine_out: out must be contiguous, got stride ",
                    out.strides());
  TORCH_CHECK_VALUE(!shares_memory_partially(out, input),
                    "fused_input_norm.affine_out: out partially overlaps input; pass out=input exactly to "
                    "normalize in place, or a separate buffer");
  // Every thread reads weight/bias while others write out: they must not share memory with out.
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"weight", weight}, {"bias", bias}}) {
    TORCH_CHECK_VALUE(!may_overlap(out, t), "fused_input_norm.affine_out: out overlaps ", name,
                      "; pass a separate output buffer");
  }
}

AffinePlan plan_affine(const at::Tensor& input, int64_t dim) {
  AffinePlan plan{};
  const int64_t wrapped = at::maybe_wrap_dim(dim, input.dim());
  plan.source = input;
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
    plan.source = input.contiguous();
  }
  plan.kind = AffinePlan::Kind::kContiguous;
  plan.inner = 1;
  for (int64_t d = wrapped + 1; d < input.dim(); ++d) plan.inner *= input.size(d);
  if (plan.channels == 1) plan.inner = plan.numel;  // one channel: the whole tensor is one run
  return plan;
}

namespace {

std::string build_info() {
  std::ostringstream s;
  s << "{";
#if defined(FIN_WITH_GPU)
  s << "\"backends\": [\"cpu\", \"" << gpu_backend_name() << "\"], " << gpu_build_fields();
#else
  s << "\"backends\": [\"cpu\"]";
#endif
  s << "}";
  return s.str();
}

}  // namespace

TORCH_LIBRARY(fused_input_norm, m) {
  m.def("affine(Tensor input, Tensor weight, Tensor bias, int dim=1, ScalarType? out_dtype=None) -> Tensor");
  m.def("affine_out(Tensor(a!) out, Tensor input, Tensor weight, Tensor bias, int dim=1) -> ()");
  m.def("build_info() -> str", &build_info);
}

}  // namespace fused_input_norm

#if defined(FIN_PYTHON_MODULE)
// The Python extension (setup.py) is a plain shared library whose import registers the ops above; it
// defines no Python functions, so it needs no pybind11 and builds against the limited API. The CMake
// library has no Python entry point: torch.ops.load_library or C++ linking loads it.
PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
#endif
