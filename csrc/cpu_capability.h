// The CPU capability the CPU kernels run with, torch-free. The choice is made once per process, in
// cpu_capability.cpp, and every translation unit that runs CPU kernels (affine_cpu.cpp, each
// resample_cpu_<capability>.cpp, the build_info in ops.cpp, the torch-free tests/cpp/cpu_kernels.cpp) reads that one
// choice: made in each unit, it would read the environment and warn about a bad value once per unit.
// with_cpu_capability stays here, in the header, because it must inline each caller's kernel into a function compiled
// for the capability; it cannot be compiled once in a .cpp for callers it does not know.
//
// On x86-64 the capabilities are the baseline ISA ("default"), x86-64-v3 ("avx2": AVX2, FMA, F16C) and
// x86-64-v4 ("avx512"). On aarch64 NEON is baseline: "neon" is the best capability (the loops vectorized with
// NEON, FMA, float16 rounded by NEON's conversion instruction); "default" there is the same loops with the
// software float16 rounding. The choice: the best the CPU has, or FUSED_INPUT_NORM_CPU_CAPABILITY=default|
// avx2|avx512|neon (as PyTorch's ATEN_CPU_CAPABILITY), capped at what the CPU has, which lets the tests run
// the baseline path on any machine. FIN_CPU_PLAIN leaves out every SIMD path of ours (the plain C++ build the
// kernel tests compare against): only "default" is then supported.
//
// A new capability: an enum value, its name in cpu_capability.cpp's kNames, a case in cpu_supports, a case in
// select_cpu_capability and on_capability (with a target, if it needs one), its affine_on in
// affine_cpu_kernels.h, and its unit of the resize, resample_cpu_<name>.cpp.
#pragma once

#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(FIN_CPU_PLAIN)
#define FIN_X86 1
#endif
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(FIN_CPU_PLAIN)
#define FIN_NEON 1
#endif

namespace fused_input_norm {

enum class CpuCapability { kDefault, kAvx2, kAvx512, kNeon };

// "default", "avx2", "avx512", "neon": the names FUSED_INPUT_NORM_CPU_CAPABILITY and build_info() use.
const char* cpu_capability_name(CpuCapability capability);

// Whether this CPU can run the capability's code (and this build has it).
bool cpu_supports(CpuCapability capability);

// The capability this process runs: chosen on the first call (cpu_capability.cpp also makes that call when
// the library loads, so a bad FUSED_INPUT_NORM_CPU_CAPABILITY is reported at import), the same ever after.
CpuCapability cpu_capability();

namespace {

#if defined(FIN_X86)
#define FIN_TARGET_AVX2 __attribute__((target("arch=x86-64-v3"), noinline))
#define FIN_TARGET_AVX512 __attribute__((target("arch=x86-64-v4"), noinline))
#endif

template <CpuCapability cap>
using CapabilityTag = std::integral_constant<CpuCapability, cap>;

// Calls f(tag) with f inlined into a function compiled for the selected capability (f's body must be
// always-inline, hence `[&](auto cap) FIN_CPU_KERNEL_LAMBDA { kernel<cap>(...); }`), so each capability gets
// its own vector code.
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

#if defined(FIN_NEON)
template <typename F>
__attribute__((noinline)) void on_neon(const F& f) {
  f(CapabilityTag<CpuCapability::kNeon>{});
}
#endif

// Calls f(tag) for the capability this process runs, with no target of its own: f picks the code, for one
// capability compiled in another translation unit (resample_cpu.cpp calls each capability's resize so).
template <typename F>
inline void select_cpu_capability(const F& f) {
  switch (cpu_capability()) {
#if defined(FIN_NEON)
    case CpuCapability::kNeon:
      return f(CapabilityTag<CpuCapability::kNeon>{});
#endif
#if defined(FIN_X86)
    case CpuCapability::kAvx512:
      return f(CapabilityTag<CpuCapability::kAvx512>{});
    case CpuCapability::kAvx2:
      return f(CapabilityTag<CpuCapability::kAvx2>{});
#endif
    default:
      return f(CapabilityTag<CpuCapability::kDefault>{});
  }
}

// Calls f(tag) with f inlined into the function compiled for capability `cap` alone: code for one capability
// only, where the caller already knows which.
template <CpuCapability cap, typename F>
inline void on_capability(const F& f) {
  if constexpr (cap == CpuCapability::kDefault) {
    on_default(f);
#if defined(FIN_X86)
  } else if constexpr (cap == CpuCapability::kAvx2) {
    on_avx2(f);
  } else if constexpr (cap == CpuCapability::kAvx512) {
    on_avx512(f);
#endif
#if defined(FIN_NEON)
  } else if constexpr (cap == CpuCapability::kNeon) {
    on_neon(f);
#endif
  } else {
    static_assert(cap == CpuCapability::kDefault, "a capability this build does not compile");
  }
}

template <typename F>
inline void with_cpu_capability(const F& f) {
  select_cpu_capability([&](auto cap) { on_capability<decltype(cap)::value>(f); });
}

}  // namespace
}  // namespace fused_input_norm
