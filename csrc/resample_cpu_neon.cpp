// The CPU resize compiled for NEON (aarch64) alone: see resample_cpu_bands.h.
#include "resample_cpu_bands.h"

#if defined(FIN_NEON)
namespace fused_input_norm {
template void run_resize_cpu_with<CpuCapability::kNeon>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                        const ResizePlan&);
}  // namespace fused_input_norm
#endif
