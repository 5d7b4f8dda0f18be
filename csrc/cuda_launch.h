// The GPU glue's launch helpers (CUDA, and HIP through hipify): the current stream, error checks, and grids
// sized to one resident wave for the grid-stride kernels.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

// torch's STD_CUDA_CHECK formats its message in libtorch_cuda, which a CPU-only torch lacks.
#define FIN_CUDA_CHECK(EXPR)                                                                                   \
  do {                                                                                                         \
    const cudaError_t fin_error = (EXPR);                                                                      \
    if (fin_error != cudaSuccess) {                                                                            \
      throw std::runtime_error(std::string("fused_input_norm: CUDA error: ") + cudaGetErrorString(fin_error) + \
                               " (" #EXPR ")");                                                                \
    }                                                                                                          \
  } while (0)

namespace fused_input_norm {

// The stream torch's CUDA (HIP) library holds current for `device`. The stable ABI's accessor for it
// (Stream::nativeHandle) arrived in torch 2.13; the AOTI C shim below has been exported by libtorch_cuda
// (libtorch_hip) since 2.10, so reading it keeps the floor at TORCH_TARGET_VERSION (2.11). The extension
// never links that library (the wheel must load on a CPU-only torch), and torch loads it RTLD_LOCAL, so
// dlsym(RTLD_DEFAULT) cannot see it: dlopen(RTLD_NOLOAD) finds the copy torch loaded without loading one.
#if defined(USE_ROCM)
inline constexpr const char* kTorchGpuLibrary = "libtorch_hip.so";
#else
inline constexpr const char* kTorchGpuLibrary = "libtorch_cuda.so";
#endif

inline cudaStream_t current_stream(int device) {
  using GetCurrentStream = int32_t (*)(int32_t device_index, void** ret_stream);  // AOTITorchError: 0 = ok
  static const GetCurrentStream get_current_stream = []() -> GetCurrentStream {
    void* library = dlopen(kTorchGpuLibrary, RTLD_LAZY | RTLD_NOLOAD);
    return library ? reinterpret_cast<GetCurrentStream>(dlsym(library, "aoti_torch_get_current_cuda_stream")) : nullptr;
  }();
  if (get_current_stream == nullptr) {
    throw std::runtime_error(std::string("fused_input_norm: cannot read torch's current GPU stream: ") +
                             kTorchGpuLibrary + " is not loaded or lacks aoti_torch_get_current_cuda_stream" +
                             " (a GPU build of torch >= 2.10 has both)");
  }
  void* stream = nullptr;
  if (get_current_stream(device, &stream) != 0) {
    throw std::runtime_error("fused_input_norm: torch could not give the current stream of device " +
                             std::to_string(device));
  }
  return static_cast<cudaStream_t>(stream);
}

constexpr int kThreads = 256;
constexpr int kMaxDevices = 64;

// Blocks of `Kernel` that fit on the device at once (occupancy x SMs), cached per device and kernel. The
// grid is never larger: the grid-stride loops cover the rest, so no grid-dimension limit can be hit and
// no block waits for a second wave.
template <auto Kernel>
int resident_blocks(int device) {
  static std::atomic<int> cache[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) device = 0;
  int blocks = cache[device].load(std::memory_order_relaxed);
  if (blocks == 0) {
    int sms = 0, per_sm = 0;
    FIN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    FIN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, kThreads, 0));
    blocks = std::max(1, sms * per_sm);
    cache[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

// Launches Kernel on enough threads for `work_items` thread steps, at most one resident wave.
template <auto Kernel, typename... Args>
void launch(int64_t work_items, int device, cudaStream_t stream, Args... args) {
  const int64_t needed = std::max<int64_t>(1, (work_items + kThreads - 1) / kThreads);
  const int64_t grid = std::min<int64_t>(needed, resident_blocks<Kernel>(device));
  Kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(args...);
  FIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace fused_input_norm
