// The CPU resize compiled for AVX-512 (x86-64-v4) alone: see resample_cpu_bands.h.
#include "resample_cpu_bands.h"

#if defined(FIN_X86)
namespace fused_input_norm {
template void run_resize_cpu_with<CpuCapability::kAvx512>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                          const ResizePlan&);
}  // namespace fused_input_norm
#endif
