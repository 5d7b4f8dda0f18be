// Schemas of every fused_input_norm op, the checks both backends share, and the Python module stub.
#if defined(FIN_PYTHON_MODULE)
#include <Python.h>
#endif
#include <torch/csrc/stable/library.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "affine.h"

namespace fused_input_norm {

#if defined(FIN_WITH_GPU)
// affine_cuda.cu: the GPU backend's name ("cuda" or "hip") and its JSON fields (toolkit version, archs).
const char* gpu_backend_name();
std::string gpu_build_fields();
#endif
// affine_cpu.cpp: the CPU kernels' capability in this process ("default", "avx2", "avx512").
const char* cpu_capability_name();

void throw_arg_error(ArgError kind, const std::string& message) {
  switch (kind) {
    case ArgError::kValue:
      throw std::runtime_error("[ValueError] " + message);
    case ArgError::kType:
      throw std::runtime_error("[TypeError] " + message);
    case ArgError::kIndex:
      throw std::runtime_error("[IndexError] " + message);
    case ArgError::kRuntime:
      break;
  }
  throw std::runtime_error(message);
}

namespace {

// Python spellings, since the messages surface as Python exceptions.
std::string py_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
      return "torch.uint8";
    case ScalarType::Char:
      return "torch.int8";
    case ScalarType::Short:
      return "torch.int16";
    case ScalarType::Int:
      return "torch.int32";
    case ScalarType::Long:
      return "torch.int64";
    case ScalarType::UInt16:
      return "torch.uint16";
    case ScalarType::UInt32:
      return "torch.uint32";
    case ScalarType::UInt64:
      return "torch.uint64";
    case ScalarType::Half:
      return "torch.float16";
    case ScalarType::BFloat16:
      return "torch.bfloat16";
    case ScalarType::Float:
      return "torch.float32";
    case ScalarType::Double:
      return "torch.float64";
    case ScalarType::Bool:
      return "torch.bool";
    case ScalarType::ComplexFloat:
      return "torch.complex64";
    case ScalarType::ComplexDouble:
      return "torch.complex128";
    default:
      return std::string("torch.") + torch::headeronly::toString(t);
  }
}

// As Python prints them: "cpu", "cuda:0".
std::string device_name(const torch::stable::Device& d) {
  std::string name;
  switch (d.type()) {
    case torch::headeronly::DeviceType::CPU:
      name = "cpu";
      break;
    case torch::headeronly::DeviceType::CUDA:
      name = "cuda";
      break;
    case torch::headeronly::DeviceType::Meta:
      name = "meta";
      break;
    default:
      name = "device type " + std::to_string(static_cast<int>(d.type()));
  }
  return d.has_index() ? name + ":" + std::to_string(d.index()) : name;
}

// As Python prints a shape or a stride: "[2, 3, 5]".
std::string int_list(torch::headeronly::IntHeaderOnlyArrayRef values) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < values.size(); ++i) s << (i ? ", " : "") << values[i];
  s << "]";
  return s.str();
}

bool is_input_dtype(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::UInt16 || t == ScalarType::Half || t == ScalarType::BFloat16 ||
         t == ScalarType::Float;
}

bool is_output_dtype(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 || t == ScalarType::Float;
}

constexpr const char* kInputDtypes = "torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32";
constexpr const char* kOutputDtypes = "torch.float16, torch.bfloat16, torch.float32";

// Every metadata query is a call into torch (and dtype and device take a dozen to translate the answer),
// hence each is asked once. That keeps a tiny call within ~0.5 us of the ATen glue it replaced.
void check_channel_vector(const char* op, const char* name, const Tensor& t, const torch::stable::Device& device,
                          int64_t dim, int64_t channels) {
  if (const torch::stable::Device t_device = t.device(); t_device != device) {
    fail(ArgError::kRuntime, "fused_input_norm.", op, ": ", name, " must be on input's device ", device_name(device),
         ", got ", device_name(t_device));
  }
  if (const ScalarType dtype = t.scalar_type(); dtype != ScalarType::Float) {
    fail(ArgError::kType, "fused_input_norm.", op, ": ", name, " must be a float32 tensor, got ", py_dtype(dtype));
  }
  if (t.dim() != 1) {
    fail(ArgError::kValue, "fused_input_norm.", op, ": ", name, " must be 1-D (one value per channel), got ", t.dim(),
         "-D shape ", int_list(t.sizes()));
  }
  if (t.size(0) != channels) {
    fail(ArgError::kValue, "fused_input_norm.", op, ": ", name, " must have one value per channel: length input.size(",
         dim, ") = ", channels, ", got ", t.size(0));
  }
  if (!t.is_contiguous()) {
    fail(ArgError::kValue, "fused_input_norm.", op, ": ", name, " must be contiguous, got stride ",
         int_list(t.strides()));
  }
}

// The bytes a tensor's elements span, [begin, end). The stable ABI has no storage identity, but two live
// allocations never share an address, so intersecting ranges mean shared memory.
std::pair<uintptr_t, uintptr_t> byte_range(const Tensor& t) {
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = t.sizes(), strides = t.strides();
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  return {begin, begin + (last + 1) * t.element_size()};
}

bool may_overlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto [a_begin, a_end] = byte_range(a);
  const auto [b_begin, b_end] = byte_range(b);
  return a_begin < b_end && b_begin < a_end;
}

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

// A direct torch.ops call may pass None for a Tensor argument: the kernel then gets an undefined tensor,
// whose first metadata query would fail inside torch with a C++ backtrace instead of naming the argument.
void check_defined(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) fail(ArgError::kType, "fused_input_norm.", op, ": ", name, " must be a torch.Tensor, got None");
}

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

Tensor new_output(const Tensor& input, ScalarType dtype) {
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = input.sizes();
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  const int32_t shim_dtype = dtype == ScalarType::Half       ? aoti_torch_dtype_float16()
                             : dtype == ScalarType::BFloat16 ? aoti_torch_dtype_bfloat16()
                                                             : aoti_torch_dtype_float32();
  int32_t device_type = 0, device_index = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(input.get(), &device_type));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(input.get(), &device_index));
  // at::empty_strided, called directly: torch::stable::empty is a boxed dispatcher call looked up by name,
  // about 1 us more per call.
  AtenTensorHandle handle = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(),
                                                  shim_dtype, device_type, device_index, &handle));
  return Tensor(handle);
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
  s << ", \"cpu_capability\": \"" << cpu_capability_name() << "\"";
  s << "}";
  return s.str();
}

}  // namespace

STABLE_TORCH_LIBRARY(fused_input_norm, m) {
  m.def("affine(Tensor input, Tensor weight, Tensor bias, int dim=1, ScalarType? out_dtype=None) -> Tensor");
  m.def("affine_out(Tensor(a!) out, Tensor input, Tensor weight, Tensor bias, int dim=1) -> ()");
  m.def("build_info() -> str");
}

// No tensor argument to dispatch on: one kernel for every backend.
STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CompositeExplicitAutograd, m) {
  m.impl("build_info", TORCH_BOX(&build_info));
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
