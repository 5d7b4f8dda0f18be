// Instantiates every GPU kernel in affine_kernel.h for every (input, output) dtype pair, index type and
// variant (every vector width, planar and interleaved), so scripts/check_rocm.sh can compile the hipified,
// torch-free header for AMD GPUs with hipcc alone. Taking a kernel's address instantiates it.
#include <cstdint>
#include <vector>

#include "affine_kernel.h"

namespace fin = fused_input_norm;

namespace {

template <typename in_t, typename out_t, typename index_t, int VEC = fin::kElemsPerVector<in_t, out_t>>
void collect_contiguous(std::vector<const void*>& kernels) {
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_contiguous_kernel<in_t, out_t, index_t, VEC>));
  if constexpr (VEC > 1) collect_contiguous<in_t, out_t, index_t, VEC / 2>(kernels);
}

template <typename in_t, typename out_t>
void collect(std::vector<const void*>& kernels) {
  collect_contiguous<in_t, out_t, uint32_t>(kernels);
  collect_contiguous<in_t, out_t, uint64_t>(kernels);
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_pixels_kernel<in_t, out_t, uint32_t, true>));
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_pixels_kernel<in_t, out_t, uint64_t, true>));
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_pixels_kernel<in_t, out_t, uint32_t, false>));
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_pixels_kernel<in_t, out_t, uint64_t, false>));
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_strided_kernel<in_t, out_t, uint32_t>));
  kernels.push_back(reinterpret_cast<const void*>(&fin::affine_strided_kernel<in_t, out_t, uint64_t>));
}

template <typename in_t>
void collect_outputs(std::vector<const void*>& kernels) {
  collect<in_t, fin::half_bits>(kernels);
  collect<in_t, fin::bfloat16_bits>(kernels);
  collect<in_t, float>(kernels);
}

}  // namespace

std::vector<const void*> every_kernel() {
  std::vector<const void*> kernels;
  collect_outputs<uint8_t>(kernels);
  collect_outputs<uint16_t>(kernels);
  collect_outputs<fin::half_bits>(kernels);
  collect_outputs<fin::bfloat16_bits>(kernels);
  collect_outputs<float>(kernels);
  return kernels;
}
