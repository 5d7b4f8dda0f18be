// The CPU kernels' instruction-set capability, chosen once per process, and the way a kernel is compiled
// for each: shared by every CPU kernel file (affine_cpu.cpp, resample_cpu.cpp).
#pragma once

#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FIN_X86 1
#endif

// The inner loops are compiled once per CPU capability: on x86-64 for the baseline ISA ("default"),
// x86-64-v3 ("avx2": AVX2, FMA, F16C) and x86-64-v4 ("avx512"). The kernels (FIN_CPU_KERNEL) are
// always-inline templates on the capability; with_cpu_capability inlines one into a function compiled with
// that capability's target attribute, so each gets its own vector code. The capability is chosen once, at
// load time: the best the CPU has, or FUSED_INPUT_NORM_CPU_CAPABILITY=default|avx2|avx512 (as PyTorch's
// ATEN_CPU_CAPABILITY), capped at what the CPU has, which lets the tests run the baseline path on any
// machine. Each capability computes x * w + b with one rounding (affine_on), so all give the same bits.
// A new capability (say NEON on aarch64): an enum value, its name in kCapabilityNames, a case in
// cpu_supports, a target in with_cpu_capability (if it needs one) and its affine_on.
#define FIN_CPU_KERNEL inline __attribute__((always_inline))
#if defined(FIN_X86)
#define FIN_TARGET_AVX2 __attribute__((target("arch=x86-64-v3"), noinline))
#define FIN_TARGET_AVX512 __attribute__((target("arch=x86-64-v4"), noinline))
#endif

namespace fused_input_norm {

enum class CpuCapability { kDefault, kAvx2, kAvx512 };

// The capability this process runs, chosen once when the library loads (affine_cpu.cpp).
extern const CpuCapability kCpuCapability;
const char* cpu_capability_name();

template <CpuCapability cap>
using CapabilityTag = std::integral_constant<CpuCapability, cap>;

// Calls f(tag) with f inlined into a function compiled for the selected capability (f's body must be
// always-inline, hence `[&](auto cap) FIN_CPU_KERNEL_LAMBDA { kernel<cap>(...); }`).
#define FIN_CPU_KERNEL_LAMBDA __attribute__((always_inline))
template <typename F>
__attribute__((noinline)) void on_default(const F& f) {
  f(CapabilityTag<CpuCapability::kDefault>{});
}
#if defined(FIN_X86)
template <typename F>
FIN_TARGET_AVX2 void on_avx2(const F& f) {
  f(CapabilityTag<CpuCapability::kAvx2>{});
}
template <typename F>
FIN_TARGET_AVX512 void on_avx512(const F& f) {
  f(CapabilityTag<CpuCapability::kAvx512>{});
}
#endif

template <typename F>
inline void with_cpu_capability(const F& f) {
  switch (kCpuCapability) {
#if defined(FIN_X86)
    case CpuCapability::kAvx512:
      return on_avx512(f);
    case CpuCapability::kAvx2:
      return on_avx2(f);
#endif
    default:
      return on_default(f);
  }
}

}  // namespace fused_input_norm
