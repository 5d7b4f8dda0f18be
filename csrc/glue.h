// The glue every op shares, on the LibTorch stable ABI (definitions in glue.cpp): tagged argument errors,
// Python spellings for messages, memory overlap, and output allocation.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

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

// Python spellings, since the messages surface as Python exceptions: "torch.uint8", "cuda:0", "[2, 3, 5]".
std::string py_dtype(ScalarType t);
std::string device_name(const torch::stable::Device& d);
std::string int_list(torch::headeronly::IntHeaderOnlyArrayRef values);

// True when the bytes the two tensors' elements span intersect. The stable ABI has no storage identity,
// but two live allocations never share an address, so intersecting ranges mean shared memory.
bool may_overlap(const Tensor& a, const Tensor& b);

// A new contiguous tensor on like's device (or the given one); dtype is uint8, int32, float16, bfloat16 or
// float32.
Tensor new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef sizes, ScalarType dtype, const Tensor& like);
Tensor new_contiguous(torch::headeronly::IntHeaderOnlyArrayRef sizes, ScalarType dtype, int32_t device_type,
                      int32_t device_index);

// A direct torch.ops call may pass None for a Tensor argument: the kernel then gets an undefined tensor,
// whose first metadata query would fail inside torch with a C++ backtrace instead of naming the argument.
void check_defined(const char* op, const char* name, const Tensor& t);

// `t` is a float32, 1-D, contiguous tensor of `channels` values on `device` (weight, bias): `op`'s checks.
void check_channel_vector(const char* op, const char* name, const Tensor& t, const torch::stable::Device& device,
                          int64_t dim, int64_t channels);

// The dtypes the affine writes, and their names for messages.
bool is_output_dtype(ScalarType t);
extern const char* const kOutputDtypes;

// A backend's preparation of a freshly allocated output before the kernel first touches it.
using PrepareOutput = void (*)(const Tensor& out);
inline void leave_output_as_is(const Tensor&) {}

// Transparent huge pages for a CPU output of several of them, before a kernel first touches it: the first
// touch of 4 KiB pages otherwise costs several times the kernel itself (a 165 MB output: ~100 ms of faults
// against ~15 ms of work; 73 MB of uint8 patch rows: 32 ms against 8). madvise is advice: it changes no
// value, pages already touched keep theirs, and an error or a kernel without THP changes nothing.
void advise_huge_pages(const Tensor& out);

}  // namespace fused_input_norm
