// The one choice of CPU capability per process (cpu_capability.h says why it is made here, once).
#include "cpu_capability.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fused_input_norm {
namespace {

constexpr const char* kNames[] = {"default", "avx2", "avx512", "neon"};
constexpr int kCount = sizeof(kNames) / sizeof(kNames[0]);

// The requested capability if the CPU has it, else the best one below it that it has. An unknown name is
// ignored with a warning (an import should not fail over a tuning knob), as ATEN_CPU_CAPABILITY does.
CpuCapability select_cpu_capability() {
#if defined(FIN_X86)
  __builtin_cpu_init();  // this runs from a static initializer, possibly before libgcc's own
#endif
  int best = kCount - 1;
  if (const char* requested = std::getenv("FUSED_INPUT_NORM_CPU_CAPABILITY"); requested && *requested) {
    int found = 0;
    while (found < kCount && std::strcmp(kNames[found], requested) != 0) ++found;
    if (found < kCount) {
      best = found;
    } else {
      std::fprintf(
          stderr,
          "fused_input_norm: ignoring FUSED_INPUT_NORM_CPU_CAPABILITY=%s (expected default, avx2, avx512 or neon)\n",
          requested);
    }
  }
  while (best > 0 && !cpu_supports(static_cast<CpuCapability>(best))) --best;
  return static_cast<CpuCapability>(best);
}

}  // namespace

const char* cpu_capability_name(CpuCapability capability) { return kNames[static_cast<int>(capability)]; }

bool cpu_supports(CpuCapability capability) {
  switch (capability) {
    case CpuCapability::kDefault:
      return true;
#if defined(FIN_X86)
    case CpuCapability::kAvx2:
      return __builtin_cpu_supports("x86-64-v3");
    case CpuCapability::kAvx512:
      return __builtin_cpu_supports("x86-64-v4");
#endif
#if defined(FIN_NEON)
    case CpuCapability::kNeon:
      return true;
#endif
    default:
      return false;
  }
}

// A function-local static, not a namespace-scope constant: it is initialized (once, thread-safely) by
// whichever comes first, this unit's initializer below or a kernel called from another unit's static
// initializer, which would otherwise read a constant not yet initialized (kDefault, silently).
CpuCapability cpu_capability() {
  static const CpuCapability selected = select_cpu_capability();
  return selected;
}

namespace {
// Chooses when the library loads, as ATEN_CPU_CAPABILITY is read, so a bad value is reported at import and
// not at the first CPU op.
[[maybe_unused]] const CpuCapability kChosenAtLoad = cpu_capability();
}  // namespace

}  // namespace fused_input_norm
