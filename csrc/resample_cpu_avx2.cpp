// The CPU resize compiled for AVX2 with FMA and F16C (x86-64-v3) alone: see resample_cpu_bands.h.
#include "resample_cpu_bands.h"

#if defined(FIN_X86)
namespace fused_input_norm {
template void run_resize_cpu_with<CpuCapability::kAvx2>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                        const ResizePlan&);
}  // namespace fused_input_norm
#endif
