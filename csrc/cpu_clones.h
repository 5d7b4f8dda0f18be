// How the CPU kernels' inner loops are compiled: three times on x86-64, for the baseline ISA, x86-64-v3
// (AVX2, FMA, F16C) and x86-64-v4 (AVX-512), the loader picking one. The kernel math is header-inline, so
// each clone gets its own vector code.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FIN_X86 1
#define FIN_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), noinline))
#else
#define FIN_CPU_CLONES
#endif
