// The CPU resize compiled for the baseline ISA (x86-64, or aarch64 with software float16 rounding) alone: see
// resample_cpu_bands.h.
#include "resample_cpu_bands.h"

namespace fused_input_norm {
template void run_resize_cpu_with<CpuCapability::kDefault>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                           const ResizePlan&);
}  // namespace fused_input_norm
