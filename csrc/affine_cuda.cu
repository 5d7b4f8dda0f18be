// CUDA (and, through hipify, ROCm) implementation: thin glue around the kernels in affine_kernel.h.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "affine.h"
#include "dispatch.h"

namespace fused_input_norm {
namespace {

constexpr int kThreads = 256;
// Enough resident blocks to fill every SM; the grid-stride loops cover the rest, so the grid never
// grows with numel and no grid-dimension limit can be hit.
constexpr int kBlocksPerSm = 8;

int max_blocks(int device) {
  static std::atomic<int> cache[64] = {};
  if (device < 0 || device >= 64) device = 0;
  int blocks = cache[device].load(std::memory_order_relaxed);
  if (blocks == 0) {
    int sms = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    blocks = std::max(1, sms) * kBlocksPerSm;
    cache[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

unsigned grid_for(int64_t work_items, int device) {
  const int64_t needed = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(needed, max_blocks(device))));
}

bool is_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kBytesPerLoad == 0; }

void run_affine_cuda(const at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                     int64_t dim) {
  const AffinePlan plan = plan_affine(input, dim);
  if (plan.numel == 0) return;
  const c10::cuda::CUDAGuard guard(input.device());
  const int device = input.get_device();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  const float* w = weight.const_data_ptr<float>();
  const float* b = bias.const_data_ptr<float>();

  FIN_DISPATCH_IN_OUT(plan.source.scalar_type(), out.scalar_type(), [&] {
    const auto* in = static_cast<const in_t*>(plan.source.const_data_ptr());
    auto* y = static_cast<out_t*>(out.data_ptr());
    if (plan.contiguous && is_aligned(in) && is_aligned(y)) {
      constexpr int vec = kElemsPerVector<in_t, out_t>;
      const unsigned grid = grid_for((plan.numel + vec - 1) / vec, device);
      const auto launch = [&](auto index_type) {
        using index_t = decltype(index_type);
        affine_contiguous_kernel<in_t, out_t, index_t>
            <<<grid, kThreads, 0, stream>>>(in, y, w, b, static_cast<index_t>(plan.numel),
                                            static_cast<index_t>(plan.inner), static_cast<index_t>(plan.channels));
      };
      // 32-bit indexing when it fits: the per-vector division is several times cheaper.
      if (plan.numel <= std::numeric_limits<int32_t>::max()) {
        launch(uint32_t{});
      } else {
        launch(uint64_t{});
      }
    } else {
      affine_strided_kernel<in_t, out_t>
          <<<grid_for(plan.numel, device), kThreads, 0, stream>>>(in, y, w, b, plan.numel, plan.strided);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

#if defined(USE_ROCM)
const char* gpu_backend_name() { return "hip"; }
std::string gpu_build_fields() {
  std::ostringstream s;
  s << "\"hip_version\": \"" << HIP_VERSION_MAJOR << "." << HIP_VERSION_MINOR << "\", \"archs\": \""
#if defined(FIN_GPU_ARCHS)
    << FIN_GPU_ARCHS
#endif
    << "\"";
  return s.str();
}
#else
const char* gpu_backend_name() { return "cuda"; }
std::string gpu_build_fields() {
  std::ostringstream s;
  s << "\"cuda_version\": \"" << CUDART_VERSION / 1000 << "." << (CUDART_VERSION % 1000) / 10 << "\", \"archs\": [";
  // nvcc defines __CUDA_ARCH_LIST__ (e.g. 800,900) in every pass: the archs it really generated code for.
#if defined(__CUDA_ARCH_LIST__)
  constexpr int archs[] = {__CUDA_ARCH_LIST__};
  for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); ++i)
    s << (i ? ", " : "") << "\"sm_" << archs[i] / 10 << "\"";
#endif
  s << "]";
  return s.str();
}
#endif

TORCH_LIBRARY_IMPL(fused_input_norm, CUDA, m) {
  m.impl("affine", &affine_op<run_affine_cuda>);
  m.impl("affine_out", &affine_out_op<run_affine_cuda>);
}

}  // namespace fused_input_norm
