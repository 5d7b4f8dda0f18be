// Instantiates every GPU kernel in affine_kernel.h for every (input, output) dtype pair and index type,
// so scripts/check_rocm.sh can compile the hipified, torch-free header for AMD GPUs with hipcc alone.
#include <cstdint>

#include "affine_kernel.h"

namespace fin = fused_input_norm;

#define FIN_INSTANTIATE(IN, OUT)                                                                                     \
  template __global__ void fin::affine_contiguous_kernel<IN, OUT, uint32_t>(                                         \
      const IN*, OUT*, const float*, const float*, uint32_t, uint32_t, uint32_t);                                    \
  template __global__ void fin::affine_contiguous_kernel<IN, OUT, uint64_t>(                                         \
      const IN*, OUT*, const float*, const float*, uint64_t, uint64_t, uint64_t);                                    \
  template __global__ void fin::affine_strided_kernel<IN, OUT>(const IN*, OUT*, const float*, const float*, int64_t, \
                                                               fin::StridedLayout);

#define FIN_INSTANTIATE_OUTPUTS(IN)       \
  FIN_INSTANTIATE(IN, fin::half_bits)     \
  FIN_INSTANTIATE(IN, fin::bfloat16_bits) \
  FIN_INSTANTIATE(IN, float)

FIN_INSTANTIATE_OUTPUTS(uint8_t)
FIN_INSTANTIATE_OUTPUTS(uint16_t)
FIN_INSTANTIATE_OUTPUTS(fin::half_bits)
FIN_INSTANTIATE_OUTPUTS(fin::bfloat16_bits)
FIN_INSTANTIATE_OUTPUTS(float)
