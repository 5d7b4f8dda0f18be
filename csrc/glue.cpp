// The glue every op shares, on the LibTorch stable ABI: tagged errors, Python spellings for messages, memory
// overlap, and output allocation.
#include "glue.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fused_input_norm {

const char* const kOutputDtypes = "torch.float16, torch.bfloat16, torch.float32";

void check_defined(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) fail(ArgError::kType, "fused_input_norm.", op, ": ", name, " must be a torch.Tensor, got None");
}

bool is_output_dtype(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 || t == ScalarType::Float;
}

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

namespace {

// The bytes a tensor's elements span, [begin, end).
std::pair<uintptr_t, uintptr_t> byte_range(const Tensor& t) {
  const torch::headeronly::IntHeaderOnlyArrayRef sizes = t.sizes(), strides = t.strides();
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  return {begin, begin + (last + 1) * t.element_size()};
}

}  // namespace

bool may_overlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto [a_begin, a_end] = byte_range(a);
  const auto [b_begin, b_end] = byte_range(b);
  return a_begin < b_end && b_begin < a_end;
}

Tensor new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef sizes, ScalarType dtype, const Tensor& like) {
  int32_t device_type = 0, device_index = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  return new_contiguous(sizes, dtype, device_type, device_index);
}

Tensor new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef sizes, ScalarType dtype, int32_t device_type,
                      int32_t device_index) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  const int32_t shim_dtype = dtype == ScalarType::Half       ? aoti_torch_dtype_float16()
                             : dtype == ScalarType::BFloat16 ? aoti_torch_dtype_bfloat16()
                             : dtype == ScalarType::Byte     ? aoti_torch_dtype_uint8()
                             : dtype == ScalarType::Int      ? aoti_torch_dtype_int32()
                                                             : aoti_torch_dtype_float32();
  // at::empty_strided, called directly: torch::stable::empty is a boxed dispatcher call looked up by name,
  // about 1 us more per call.
  AtenTensorHandle handle = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(),
                                                  shim_dtype, device_type, device_index, &handle));
  return Tensor(handle);
}

void advise_huge_pages(const Tensor& out) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto nbytes = static_cast<uintptr_t>(out.numel()) * out.element_size();
  // FUSED_INPUT_NORM_HUGE_PAGES=0 leaves every output to the system's page size (where THP compaction
  // stalls cost more than the faults they save).
  static const bool enabled = [] {
    const char* value = std::getenv("FUSED_INPUT_NORM_HUGE_PAGES");
    return value == nullptr || std::string(value) != "0";
  }();
  if (!enabled || nbytes < 4 * kHugePage) return;
  const auto begin = reinterpret_cast<uintptr_t>(out.mutable_data_ptr());
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (begin + nbytes) & ~(kHugePage - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)out;
#endif
}

}  // namespace fused_input_norm
