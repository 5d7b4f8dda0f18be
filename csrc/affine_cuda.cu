// CUDA (and, through hipify, ROCm) implementation: thin glue around the kernels in affine_kernel.h.
// The device guard comes from torch's stable accelerator API and the current stream from the C shim that
// libtorch_cuda exports (cuda_launch.h), neither by linking libtorch_cuda, and the CUDA runtime is linked
// statically (setup.py), so the extension also loads on a CPU-only torch.
#include <cuda_runtime.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "affine.h"
#include "affine_kernel.h"
#include "cuda_launch.h"
#include "dispatch.h"

namespace fused_input_norm {
namespace {

// Calls body(std::integral_constant<int, V>) with the widest V <= MAX (a power of two) that both pointers
// are aligned for.
template <typename in_t, typename out_t, int V = kElemsPerVector<in_t, out_t>, typename Body>
void with_widest_vector(const in_t* in, const out_t* out, Body&& body) {
  if constexpr (V == 1) {
    body(std::integral_constant<int, 1>{});
  } else {
    if (vectors_fit<in_t, out_t, V>(in, out)) return body(std::integral_constant<int, V>{});
    with_widest_vector<in_t, out_t, V / 2>(in, out, body);
  }
}

bool is_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kBytesPerLoad == 0; }

template <typename in_t, typename out_t, typename index_t>
void launch_affine(const AffinePlan& plan, const in_t* in, out_t* y, const float* w, const float* b, int device,
                   cudaStream_t stream) {
  constexpr int kVec = kElemsPerVector<in_t, out_t>;
  const auto numel = static_cast<index_t>(plan.numel);
  const bool aligned = is_aligned(in) && is_aligned(y);
  switch (plan.kind) {
    case AffinePlan::Kind::kChannelsLast: {
      const auto& shape = plan.pixels;
      if (aligned && shape.pixels % kVec == 0) {
        return launch<affine_pixels_kernel<in_t, out_t, index_t, true>>(
            plan.numel / (shape.channels * kVec), device, stream, in, y, w, b, numel, static_cast<int>(shape.channels),
            static_cast<index_t>(shape.pixels));
      }
      break;  // the general strided kernel reads the same layout
    }
    case AffinePlan::Kind::kContiguous:
      if (aligned && plan.inner == 1 && plan.channels >= 2 && plan.channels <= 4) {  // NHWC, C <= 4
        return launch<affine_pixels_kernel<in_t, out_t, index_t, false>>(plan.numel / (plan.channels * kVec) + 1,
                                                                         device, stream, in, y, w, b, numel,
                                                                         static_cast<int>(plan.channels), index_t{0});
      }
      return with_widest_vector(in, y, [&](auto vec) {
        constexpr int V = decltype(vec)::value;
        // Two vectors per thread step.
        launch<affine_contiguous_kernel<in_t, out_t, index_t, V>>(plan.numel / (2 * V) + 1, device, stream, in, y, w, b,
                                                                  numel, static_cast<index_t>(plan.inner),
                                                                  static_cast<index_t>(plan.channels));
      });
    case AffinePlan::Kind::kStrided:
      break;
  }
  launch<affine_strided_kernel<in_t, out_t, index_t>>(plan.numel / kStridedRun + 1, device, stream, in, y, w, b, numel,
                                                      make_offset_calculator<index_t>(plan.layout));
}

// 32-bit indexing (magic-number division) when every index and input offset fits in 31 bits.
bool fits_32_bit(const AffinePlan& plan) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (plan.numel > kMax) return false;
  if (plan.kind == AffinePlan::Kind::kContiguous) return true;
  int64_t last = 0;
  for (int d = 0; d < plan.layout.ndim; ++d) last += (plan.layout.sizes[d] - 1) * plan.layout.strides[d];
  return last < kMax;
}

void run_affine_cuda(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t dim) {
  const AffinePlan plan = plan_affine(input, dim);
  if (plan.numel == 0) return;
  const int device = input.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  const float* w = static_cast<const float*>(weight.const_data_ptr());
  const float* b = static_cast<const float*>(bias.const_data_ptr());

  FIN_DISPATCH_IN_OUT(plan.source.scalar_type(), out.scalar_type(), [&] {
    const auto* in = static_cast<const in_t*>(plan.source.const_data_ptr());
    auto* y = static_cast<out_t*>(out.mutable_data_ptr());
    if (fits_32_bit(plan)) {
      launch_affine<in_t, out_t, uint32_t>(plan, in, y, w, b, device, stream);
    } else {
      launch_affine<in_t, out_t, uint64_t>(plan, in, y, w, b, device, stream);
    }
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

STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CUDA, m) {
  m.impl("affine", TORCH_BOX(&affine_op<run_affine_cuda>));
  m.impl("affine_out", TORCH_BOX(&affine_out_op<run_affine_cuda>));
}

}  // namespace fused_input_norm
