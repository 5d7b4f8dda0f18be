// The resize's CPU kernels, torch-free (the host compilers of every CPU capability share them; the op's glue,
// resample_cpu_bands.h, splits a call into bands and runs these on each, and tests/cpp/resize_emulation.cpp --cpu
// runs them alone, as under qemu-aarch64 where torch cannot run). A band's first-pass rows and its resampled
// uint8 rows are made in per-thread buffers that stay in L2; the passes are integer sums (resample_kernel.h),
// so the order in which they are vectorized does not change a bit.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "affine_cpu_kernels.h"
#include "resample_kernel.h"

namespace fused_input_norm {
namespace {

// Interleaved pixels up to this many bytes apart (RGBA, or Pillow's RGBX memory read in place: 4 bytes for 3
// channels) take the interleaved paths; wider ones the per-channel ones.
constexpr int64_t kMaxPixelStep = 4;
inline bool interleaved_pixels(int64_t channel_stride, int64_t pixel_step, int64_t channels) {
  return channel_stride == 1 && pixel_step >= channels && pixel_step <= kMaxPixelStep;
}

// out[x] for x in [0, count): output index plan_begin + x of one row, from `row` whose taps are `step`
// elements apart and whose element 0 is input index tap_offset.
template <CpuCapability cap>
FIN_CPU_KERNEL void horizontal_row(const uint8_t* row, int64_t step, const int32_t* plan, int64_t plan_begin,
                                   int64_t tap_offset, int64_t count, uint8_t* out) {
  const ResampleAxis axis = resample_axis(plan);
  for (int64_t x = 0; x < count; ++x) {
    const int64_t o = plan_begin + x;
    const uint8_t* base = row + (axis.bounds[2 * o] - tap_offset) * step;
    out[x] = resample_taps(base, step, axis.coeffs + o * axis.taps, axis.bounds[2 * o + 1], axis.precision);
  }
}

// ---- pmaddwd passes (x86: avx2 and avx512) ----------------------------------------------------------------
// pmaddwd multiplies int16 pairs and adds each pair's two products into int32: uint8 pixels zero-extended to
// int16 times int16 coefficients, two taps per int32 lane per instruction. torch's coefficients are int16 by
// construction (make_resample_plan). Pillow's have 22 fraction bits: each is split c = hi * 2^15 + lo with lo
// in [0, 2^15) and hi (|hi| <= 2^8 here) in int16, two sums combined as (sum_hi << 15) + sum_lo. A pair's sum
// never overflows (|p0 c0 + p1 c1| <= 2 * 255 * 2^15 < 2^31) and every other step is an int32 add or shift
// that wraps modulo 2^32, so the result is the reference's int32 sum bit for bit whenever that sum itself fits
// int32 (it does: the reference computes it in int32).
constexpr int kSplitShift = 15;
#if defined(FIN_X86)
// The AVX-512 kernels need AVX512BW (x86-64-v4 has it): pmaddwd, unpacks and packs on 512 bits.
#define FIN_TARGET_AVX512_MADD __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi,bmi2")))
#endif

// An axis's coefficients as pmaddwd operands: per output index o, `pairs` dwords (int16 c[2j] in the low half,
// c[2j + 1] in the high half, zero past the tap count); `hi` is empty unless the coefficients are split.
struct PairPlan {
  std::vector<int32_t> lo, hi;
  int64_t pairs = 0;
  bool split = false;
  bool usable = false;
};

inline int32_t pack_pair(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(a)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16));
}

PairPlan make_pair_plan(const int32_t* plan) {
  PairPlan pp;
  if (plan == nullptr) return pp;
  const ResampleAxis axis = resample_axis(plan);
  const int64_t out = plan[PlanHeader::kOutSize], taps = axis.taps;
  pp.pairs = (taps + 1) / 2;
  bool fits16 = true, fits_split = true;
  for (int64_t k = 0; k < out * taps; ++k) {
    const int32_t c = axis.coeffs[k];
    fits16 = fits16 && c >= -32768 && c <= 32767;
    const int32_t hi = c >> kSplitShift;  // arithmetic shift: c = hi * 2^15 + (c & 0x7fff)
    fits_split = fits_split && hi >= -32768 && hi <= 32767;
  }
  if (!fits16 && !fits_split) return pp;
  pp.split = !fits16;
  pp.lo.assign(static_cast<size_t>(out * pp.pairs), 0);
  if (pp.split) pp.hi.assign(static_cast<size_t>(out * pp.pairs), 0);
  for (int64_t o = 0; o < out; ++o) {
    const int32_t* c = axis.coeffs + o * taps;
    const int64_t count = std::min<int64_t>(axis.bounds[2 * o + 1], taps);
    for (int64_t j = 0; j < pp.pairs; ++j) {
      const int32_t a = 2 * j < count ? c[2 * j] : 0, b = 2 * j + 1 < count ? c[2 * j + 1] : 0;
      if (pp.split) {
        pp.lo[o * pp.pairs + j] = pack_pair(a & 0x7fff, b & 0x7fff);
        pp.hi[o * pp.pairs + j] = pack_pair(a >> kSplitShift, b >> kSplitShift);
      } else {
        pp.lo[o * pp.pairs + j] = pack_pair(a, b);
      }
    }
  }
  pp.usable = true;
  return pp;
}

// The two axes' pair plans of a call (made once per call on the host, before the parallel bands).
struct PairPlans {
  PairPlan row, col;
};

#if defined(__GNUC__) && !defined(__clang__)
// GCC's vector extensions: one source for every clone (SSE2, AVX2, AVX-512) and for NEON.
#define FIN_RESAMPLE_ROWS16 1
typedef uint8_t u8x16 __attribute__((vector_size(16)));
typedef int32_t i32x16 __attribute__((vector_size(64)));

// Transposes 16 vectors of 16 bytes: four rounds of interleaving vector i with vector i + 8.
inline __attribute__((always_inline)) void transpose16(u8x16 v[16]) {
  for (int round = 0; round < 4; ++round) {
    u8x16 t[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = __builtin_shuffle(v[i], v[i + 8], u8x16{0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23});
      t[2 * i + 1] =
          __builtin_shuffle(v[i], v[i + 8], u8x16{8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31});
    }
    for (int i = 0; i < 16; ++i) v[i] = t[i];
  }
}

// results[x] = the 16 rows' sums for output index plan_begin + x over its taps' columns (channel g of
// `step` interleaved ones), shifted and clamped to uint8. GCC's generic vectors widen uint8 to int32 one
// byte at a time on x86, so AVX2 has its own (the same integer sums, the same bits).
using MultiplyAddRows16 = void (*)(const u8x16* columns, int64_t xa, int64_t step, int64_t g, const int32_t* plan,
                                   int64_t plan_begin, int64_t count, u8x16* results);

void multiply_add_rows16_generic(const u8x16* columns, int64_t xa, int64_t step, int64_t g, const int32_t* plan,
                                 int64_t plan_begin, int64_t count, u8x16* results) {
  const ResampleAxis axis = resample_axis(plan);
  const i32x16 zero = i32x16{}, top = zero + 255, init = zero + (int32_t{1} << (axis.precision - 1));
  for (int64_t x = 0; x < count; ++x) {
    const int64_t o = plan_begin + x;
    const u8x16* col = columns + (axis.bounds[2 * o] - xa) * step + g;
    const int32_t* c = axis.coeffs + o * axis.taps;
    i32x16 acc = init;
    for (int32_t k = 0; k < axis.bounds[2 * o + 1]; ++k) acc += __builtin_convertvector(col[k * step], i32x16) * c[k];
    acc >>= axis.precision;
    acc = acc < zero ? zero : acc;
    acc = acc > top ? top : acc;
    results[x] = __builtin_convertvector(acc, u8x16);
  }
}

#if defined(FIN_X86)
// The clamp to [0, 255] of a sum shifted down is packs (to int16, saturating) then packus (to uint8).
__attribute__((target("avx2"))) void multiply_add_rows16_avx2(const u8x16* columns, int64_t xa, int64_t step, int64_t g,
                                                              const int32_t* plan, int64_t plan_begin, int64_t count,
                                                              u8x16* results) {
  const ResampleAxis axis = resample_axis(plan);
  const __m256i init = _mm256_set1_epi32(int32_t{1} << (axis.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(axis.precision);
  for (int64_t x = 0; x < count; ++x) {
    const int64_t o = plan_begin + x;
    const u8x16* col = columns + (axis.bounds[2 * o] - xa) * step + g;
    const int32_t* c = axis.coeffs + o * axis.taps;
    __m256i low = init, high = init;
    for (int32_t k = 0; k < axis.bounds[2 * o + 1]; ++k) {
      const __m128i v = reinterpret_cast<const __m128i&>(col[k * step]);
      const __m256i ck = _mm256_set1_epi32(c[k]);
      low = _mm256_add_epi32(low, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(v), ck));
      high = _mm256_add_epi32(high, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), ck));
    }
    low = _mm256_sra_epi32(low, shift);
    high = _mm256_sra_epi32(high, shift);
    const __m128i rows0 = _mm_packs_epi32(_mm256_castsi256_si128(low), _mm256_extracti128_si256(low, 1));
    const __m128i rows8 = _mm_packs_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
    reinterpret_cast<__m128i&>(results[x]) = _mm_packus_epi16(rows0, rows8);
  }
}

#endif

// results[x] for 16 rows, as multiply_add_rows16_*, with pmaddwd: `pairs` holds, for each column k of a chunk of
// outputs, the 16 rows' (column k, column k + 1) as int16 pairs (64 bytes), made once and read by every output
// whose window covers it. The columns array must hold (span + 2 * pp.pairs + 2) * step valid vectors (the
// ones past the span are only multiplied by zero coefficients).
using MaddRows16 = void (*)(const u8x16* columns, int64_t xa, int64_t step, int64_t g, const int32_t* plan,
                            const PairPlan& pp, int64_t plan_begin, int64_t count, u8x16* results);
constexpr int64_t kMaddChunk = 64;
struct alignas(64) PairColumn {  // one column pair of 16 rows: 16 x (int16, int16)
  int16_t v[32];
};  // outputs per chunk: their pair columns stay in L1
thread_local std::vector<PairColumn> pair_columns;         // per thread, kept between calls (release_large_scratch)
thread_local std::vector<u8x16> row_columns, row_results;  // horizontal_pass's 16-row columns and sums, kept alike

#if defined(FIN_X86)
__attribute__((target("avx2"))) void madd_rows16_avx2(const u8x16* columns, int64_t xa, int64_t step, int64_t g,
                                                      const int32_t* plan, const PairPlan& pp, int64_t plan_begin,
                                                      int64_t count, u8x16* results) {
  const ResampleAxis axis = resample_axis(plan);
  const __m256i init = _mm256_set1_epi32(int32_t{1} << (axis.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(axis.precision);
  const int64_t np_max = pp.pairs;
  for (int64_t x0 = 0; x0 < count; x0 += kMaddChunk) {
    const int64_t n = std::min<int64_t>(kMaddChunk, count - x0);
    const int64_t ka = axis.bounds[2 * (plan_begin + x0)] - xa;
    const int64_t kb = axis.bounds[2 * (plan_begin + x0 + n - 1)] - xa + 2 * np_max;
    if (pair_columns.size() < static_cast<size_t>(kb - ka)) pair_columns.resize(kb - ka);
    __m256i* pc = reinterpret_cast<__m256i*>(pair_columns.data());
    for (int64_t k = ka; k < kb; ++k) {
      const __m128i a = reinterpret_cast<const __m128i&>(columns[k * step + g]);
      const __m128i b = reinterpret_cast<const __m128i&>(columns[(k + 1) * step + g]);
      _mm256_store_si256(pc + 2 * (k - ka), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)));
      _mm256_store_si256(pc + 2 * (k - ka) + 1, _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b)));
    }
    for (int64_t x = x0; x < x0 + n; ++x) {
      const int64_t o = plan_begin + x;
      const __m256i* p = pc + 2 * (axis.bounds[2 * o] - xa - ka);
      const int64_t np = std::min<int64_t>((axis.bounds[2 * o + 1] + 1) / 2, np_max);
      const int32_t* cl = pp.lo.data() + o * np_max;
      __m256i low = init, high = init;
      for (int64_t j = 0; j < np; ++j) {
        const __m256i c = _mm256_set1_epi32(cl[j]);
        low = _mm256_add_epi32(low, _mm256_madd_epi16(p[4 * j], c));
        high = _mm256_add_epi32(high, _mm256_madd_epi16(p[4 * j + 1], c));
      }
      if (pp.split) {
        const int32_t* ch = pp.hi.data() + o * np_max;
        __m256i hlow = _mm256_setzero_si256(), hhigh = _mm256_setzero_si256();
        for (int64_t j = 0; j < np; ++j) {
          const __m256i c = _mm256_set1_epi32(ch[j]);
          hlow = _mm256_add_epi32(hlow, _mm256_madd_epi16(p[4 * j], c));
          hhigh = _mm256_add_epi32(hhigh, _mm256_madd_epi16(p[4 * j + 1], c));
        }
        low = _mm256_add_epi32(low, _mm256_slli_epi32(hlow, kSplitShift));
        high = _mm256_add_epi32(high, _mm256_slli_epi32(hhigh, kSplitShift));
      }
      low = _mm256_sra_epi32(low, shift);
      high = _mm256_sra_epi32(high, shift);
      const __m128i rows0 = _mm_packs_epi32(_mm256_castsi256_si128(low), _mm256_extracti128_si256(low, 1));
      const __m128i rows8 = _mm_packs_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
      reinterpret_cast<__m128i&>(results[x]) = _mm_packus_epi16(rows0, rows8);
    }
  }
}

FIN_TARGET_AVX512_MADD void madd_rows16_avx512(const u8x16* columns, int64_t xa, int64_t step, int64_t g,
                                               const int32_t* plan, const PairPlan& pp, int64_t plan_begin,
                                               int64_t count, u8x16* results) {
  const ResampleAxis axis = resample_axis(plan);
  const __m512i init = _mm512_set1_epi32(int32_t{1} << (axis.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(axis.precision);
  const __m512i zero = _mm512_setzero_si512(), top = _mm512_set1_epi32(255);
  const int64_t np_max = pp.pairs;
  for (int64_t x0 = 0; x0 < count; x0 += kMaddChunk) {
    const int64_t n = std::min<int64_t>(kMaddChunk, count - x0);
    const int64_t ka = axis.bounds[2 * (plan_begin + x0)] - xa;
    const int64_t kb = axis.bounds[2 * (plan_begin + x0 + n - 1)] - xa + 2 * np_max;
    if (pair_columns.size() < static_cast<size_t>(kb - ka)) pair_columns.resize(kb - ka);
    __m512i* pc = reinterpret_cast<__m512i*>(pair_columns.data());
    for (int64_t k = ka; k < kb; ++k) {
      const __m128i a = reinterpret_cast<const __m128i&>(columns[k * step + g]);
      const __m128i b = reinterpret_cast<const __m128i&>(columns[(k + 1) * step + g]);
      const __m256i ab =
          _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(a, b)), _mm_unpackhi_epi8(a, b), 1);
      _mm512_store_si512(pc + (k - ka), _mm512_cvtepu8_epi16(ab));
    }
    for (int64_t x = x0; x < x0 + n; ++x) {
      const int64_t o = plan_begin + x;
      const __m512i* p = pc + (axis.bounds[2 * o] - xa - ka);
      const int64_t np = std::min<int64_t>((axis.bounds[2 * o + 1] + 1) / 2, np_max);
      const int32_t* cl = pp.lo.data() + o * np_max;
      __m512i acc = init;
      for (int64_t j = 0; j < np; ++j)
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p[2 * j], _mm512_set1_epi32(cl[j])));
      if (pp.split) {
        const int32_t* ch = pp.hi.data() + o * np_max;
        __m512i hacc = zero;
        for (int64_t j = 0; j < np; ++j) {
          hacc = _mm512_add_epi32(hacc, _mm512_madd_epi16(p[2 * j], _mm512_set1_epi32(ch[j])));
        }
        acc = _mm512_add_epi32(acc, _mm512_slli_epi32(hacc, kSplitShift));
      }
      acc = _mm512_min_epi32(_mm512_max_epi32(_mm512_sra_epi32(acc, shift), zero), top);
      reinterpret_cast<__m128i&>(results[x]) = _mm512_cvtepi32_epi8(acc);
    }
  }
}
#endif

inline MaddRows16 madd_rows16_for_cpu() {
#if defined(FIN_X86)
  if (cpu_capability() == CpuCapability::kAvx512) return &madd_rows16_avx512;
  if (cpu_capability() == CpuCapability::kAvx2) return &madd_rows16_avx2;
#endif
  return nullptr;
}

// AVX2's where the process runs the avx2 or avx512 kernels (16 lanes are two AVX2 registers there too:
// an AVX-512 version no CPU here could run would be untested), the generic one for the baseline
// (FUSED_INPUT_NORM_CPU_CAPABILITY=default) and other CPUs.
inline MultiplyAddRows16 multiply_add_rows16_for_cpu() {
#if defined(FIN_X86)
  if (cpu_capability() == CpuCapability::kAvx2 || cpu_capability() == CpuCapability::kAvx512) {
    return &multiply_add_rows16_avx2;
  }
#endif
  return &multiply_add_rows16_generic;
}

#if defined(FIN_X86)
// transpose16's interleaving network on 64 (avx512) or 32 (avx2) bytes of each of the 16 rows at once: unpacks
// work per 128-bit lane, so lane l of result i is column 16 l + i. Columns [0, returned) of the rows' bytes
// [offset, offset + bytes) are written; the caller transposes the rest 16 at a time.
FIN_TARGET_AVX512_MADD int64_t transpose_columns_avx512(const uint8_t* const rows[16], int64_t offset, int64_t bytes,
                                                        u8x16* columns) {
  int64_t j0 = 0;
  for (; j0 + 64 <= bytes; j0 += 64) {
    __m512i v[16];
    for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_si512(rows[i] + offset + j0);
    for (int round = 0; round < 4; ++round) {
      __m512i t[16];
      for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi8(v[i], v[i + 8]);
        t[2 * i + 1] = _mm512_unpackhi_epi8(v[i], v[i + 8]);
      }
      for (int i = 0; i < 16; ++i) v[i] = t[i];
    }
    for (int i = 0; i < 16; ++i) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(columns + j0 + i), _mm512_castsi512_si128(v[i]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(columns + j0 + 16 + i), _mm512_extracti32x4_epi32(v[i], 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(columns + j0 + 32 + i), _mm512_extracti32x4_epi32(v[i], 2));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(columns + j0 + 48 + i), _mm512_extracti32x4_epi32(v[i], 3));
    }
  }
  return j0;
}

__attribute__((target("avx2"))) int64_t transpose_columns_avx2(const uint8_t* const rows[16], int64_t offset,
                                                               int64_t bytes, u8x16* columns) {
  int64_t j0 = 0;
  for (; j0 + 32 <= bytes; j0 += 32) {
    __m256i v[16];
    for (int i = 0; i < 16; ++i) v[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + offset + j0));
    for (int round = 0; round < 4; ++round) {
      __m256i t[16];
      for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm256_unpacklo_epi8(v[i], v[i + 8]);
        t[2 * i + 1] = _mm256_unpackhi_epi8(v[i], v[i + 8]);
      }
      for (int i = 0; i < 16; ++i) v[i] = t[i];
    }
    for (int i = 0; i < 16; ++i) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(columns + j0 + i), _mm256_castsi256_si128(v[i]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(columns + j0 + 16 + i), _mm256_extracti128_si256(v[i], 1));
    }
  }
  return j0;
}
#endif

// The horizontal pass of 16 rows at once, without gathers: the input bytes the outputs read are transposed
// into columns (one vector per byte position: the 16 rows' values), every output is then a sum over its
// taps' columns (16 rows per multiply-add), and the 16-lane results are transposed back into rows.
// rows[i]: row i's element at input index `origin` (a partial block repeats a row); `step` bytes between
// neighbours of one channel and `groups` channels interleaved in a step (HWC: step = groups = C). Output
// index plan_begin + x of channel g, row i goes to out + g * out_plane + i * out_row + x, for i < valid.
template <CpuCapability cap>
FIN_CPU_KERNEL void horizontal_rows16(const uint8_t* const rows[16], int64_t origin, int64_t step, int64_t groups,
                                      const int32_t* plan, const PairPlan* pairs, int64_t plan_begin, int64_t count,
                                      u8x16* columns, u8x16* results, uint8_t* out, int64_t out_plane, int64_t out_row,
                                      int64_t valid) {
  const ResampleAxis axis = resample_axis(plan);
  const int64_t last = plan_begin + count - 1;
  const int64_t xa = axis.bounds[2 * plan_begin], xb = axis.bounds[2 * last] + axis.bounds[2 * last + 1];
  const int64_t bytes = (xb - xa - 1) * step + groups;  // not a padded last pixel's padding: past the tensor
  int64_t j0 = 0;
#if defined(FIN_X86)
  if constexpr (cap == CpuCapability::kAvx512)
    j0 = transpose_columns_avx512(rows, (xa - origin) * step, bytes, columns);
  if constexpr (cap == CpuCapability::kAvx2) j0 = transpose_columns_avx2(rows, (xa - origin) * step, bytes, columns);
#endif
  for (; j0 < bytes; j0 += 16) {
    const int64_t n = std::min<int64_t>(16, bytes - j0);
    u8x16 v[16];
    for (int i = 0; i < 16; ++i) {
      const uint8_t* from = rows[i] + (xa - origin) * step + j0;
      if (n == 16) {
        std::memcpy(&v[i], from, 16);  // a constant size: one unaligned load, not a call
      } else {
        v[i] = u8x16{};
        std::memcpy(&v[i], from, static_cast<size_t>(n));
      }
    }
    transpose16(v);
    for (int64_t i = 0; i < n; ++i) columns[j0 + i] = v[i];
  }
  const MultiplyAddRows16 multiply_add = multiply_add_rows16_for_cpu();
  const MaddRows16 madd = pairs != nullptr ? madd_rows16_for_cpu() : nullptr;
  for (int64_t g = 0; g < groups; ++g) {
    if (madd != nullptr) {
      madd(columns, xa, step, g, plan, *pairs, plan_begin, count, results);
    } else {
      multiply_add(columns, xa, step, g, plan, plan_begin, count, results);
    }
    for (int64_t x0 = 0; x0 < count; x0 += 16) {
      const int64_t n = std::min<int64_t>(16, count - x0);
      u8x16 v[16];
      for (int64_t i = 0; i < 16; ++i) v[i] = i < n ? results[x0 + i] : u8x16{};
      transpose16(v);
      uint8_t* to = out + g * out_plane + x0;
      if (n == 16) {
        for (int64_t i = 0; i < valid; ++i) std::memcpy(to + i * out_row, &v[i], 16);
      } else {
        for (int64_t i = 0; i < valid; ++i) std::memcpy(to + i * out_row, &v[i], static_cast<size_t>(n));
      }
    }
  }
}
#endif

// The horizontal pass of `rows` rows: row i of channel c starts (at input index `origin`) at
// src + c * src_plane + i * src_row, its neighbours `step` elements apart; the results go to
// out + c * out_plane + i * out_row. Blocks of 16 rows take horizontal_rows16 where the layout allows
// (channels interleaved, HWC, possibly padded: Pillow's RGBX has step 4 for 3 channels; or each channel's
// elements contiguous, CHW), single rows otherwise.
template <CpuCapability cap>
FIN_CPU_KERNEL void horizontal_pass(const uint8_t* src, int64_t src_plane, int64_t src_row, int64_t step,
                                    int64_t channels, int64_t rows, int64_t origin, const int32_t* plan,
                                    const PairPlan* pairs, int64_t plan_begin, int64_t count, uint8_t* out,
                                    int64_t out_plane, int64_t out_row) {
#if defined(FIN_RESAMPLE_ROWS16)
  const bool interleaved = interleaved_pixels(src_plane, step, channels);
  if (interleaved || step == 1) {
    const ResampleAxis axis = resample_axis(plan);
    const int64_t last = plan_begin + count - 1;
    const int64_t span = axis.bounds[2 * last] + axis.bounds[2 * last + 1] - axis.bounds[2 * plan_begin];
    std::vector<u8x16>& columns = row_columns;
    std::vector<u8x16>& results = row_results;
    // pmaddwd reads pairs of columns up to 2 * pairs past a window's first one: zero coefficients, but
    // memory that must exist.
    const PairPlan* usable = pairs != nullptr && pairs->usable ? pairs : nullptr;
    const int64_t pad = usable != nullptr ? 2 * usable->pairs + 2 : 0;
    columns.resize(static_cast<size_t>((span + pad) * step + 16));
    results.resize(static_cast<size_t>(count));
    const int64_t groups = interleaved ? channels : 1;
    for (int64_t c = 0; c < (interleaved ? 1 : channels); ++c) {
      for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const uint8_t* row_ptrs[16];
        for (int64_t i = 0; i < 16; ++i) row_ptrs[i] = src + c * src_plane + std::min(r0 + i, rows - 1) * src_row;
        horizontal_rows16<cap>(row_ptrs, origin, step, groups, plan, usable, plan_begin, count, columns.data(),
                               results.data(), out + c * out_plane + r0 * out_row, out_plane, out_row,
                               std::min<int64_t>(16, rows - r0));
      }
    }
    return;
  }
#endif
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      horizontal_row<cap>(src + c * src_plane + r * src_row, step, plan, plan_begin, origin, count,
                          out + c * out_plane + r * out_row);
    }
  }
}

// One output row of a vertical pass over contiguous bytes with pmaddwd (see PairPlan): rows k and k + 1
// interleaved bytewise are (pixel of row k, pixel of row k + 1) pairs, zero-extended to int16 by a second
// interleave with zero; the accumulators stay in registers over all taps. The unpacks and packs work per
// 128-bit lane, and packs undo unpacks, so the bytes come back in order. A tail shorter than a vector is
// recomputed from an earlier start (the same values written twice), or, for a row shorter than one vector,
// taken by the scalar loop.
using VerticalMadd = void (*)(const uint8_t* src, int64_t row_stride, const int32_t* plan, const PairPlan& pp,
                              int64_t o, int64_t tap_offset, int64_t count, uint8_t* out);

#if defined(FIN_X86)
__attribute__((target("avx2"))) void vertical_madd_avx2(const uint8_t* src, int64_t row_stride, const int32_t* plan,
                                                        const PairPlan& pp, int64_t o, int64_t tap_offset,
                                                        int64_t count, uint8_t* out) {
  const ResampleAxis axis = resample_axis(plan);
  const uint8_t* first = src + (axis.bounds[2 * o] - tap_offset) * row_stride;
  const int64_t n = axis.bounds[2 * o + 1], np = std::min<int64_t>((n + 1) / 2, pp.pairs);
  const int32_t* cl = pp.lo.data() + o * pp.pairs;
  const int32_t* ch = pp.split ? pp.hi.data() + o * pp.pairs : nullptr;
  const __m256i init = _mm256_set1_epi32(int32_t{1} << (axis.precision - 1)), zero = _mm256_setzero_si256();
  const __m128i shift = _mm_cvtsi32_si128(axis.precision);
  if (count < 32) {
    for (int64_t x = 0; x < count; ++x) {
      out[x] =
          resample_taps(first + x, row_stride, axis.coeffs + o * axis.taps, static_cast<int32_t>(n), axis.precision);
    }
    return;
  }
  for (int64_t x0 = 0; x0 < count; x0 += 32) {
    const int64_t x = std::min(x0, count - 32);
    __m256i acc[4] = {init, init, init, init}, hacc[4] = {zero, zero, zero, zero};
    for (int64_t j = 0; j < np; ++j) {
      const uint8_t* r0 = first + 2 * j * row_stride;
      const uint8_t* r1 = 2 * j + 1 < n ? r0 + row_stride : r0;  // past the last tap: coefficient 0
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + x));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + x));
      const __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
      const __m256i p[4] = {_mm256_unpacklo_epi8(lo, zero), _mm256_unpackhi_epi8(lo, zero),
                            _mm256_unpacklo_epi8(hi, zero), _mm256_unpackhi_epi8(hi, zero)};
      const __m256i c = _mm256_set1_epi32(cl[j]);
      for (int i = 0; i < 4; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(p[i], c));
      if (ch != nullptr) {
        const __m256i cc = _mm256_set1_epi32(ch[j]);
        for (int i = 0; i < 4; ++i) hacc[i] = _mm256_add_epi32(hacc[i], _mm256_madd_epi16(p[i], cc));
      }
    }
    for (int i = 0; i < 4; ++i) {
      if (ch != nullptr) acc[i] = _mm256_add_epi32(acc[i], _mm256_slli_epi32(hacc[i], kSplitShift));
      acc[i] = _mm256_sra_epi32(acc[i], shift);
    }
    const __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(acc[0], acc[1]), _mm256_packs_epi32(acc[2], acc[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), v);
  }
}

FIN_TARGET_AVX512_MADD void vertical_madd_avx512(const uint8_t* src, int64_t row_stride, const int32_t* plan,
                                                 const PairPlan& pp, int64_t o, int64_t tap_offset, int64_t count,
                                                 uint8_t* out) {
  const ResampleAxis axis = resample_axis(plan);
  const uint8_t* first = src + (axis.bounds[2 * o] - tap_offset) * row_stride;
  const int64_t n = axis.bounds[2 * o + 1], np = std::min<int64_t>((n + 1) / 2, pp.pairs);
  const int32_t* cl = pp.lo.data() + o * pp.pairs;
  const int32_t* ch = pp.split ? pp.hi.data() + o * pp.pairs : nullptr;
  const __m512i init = _mm512_set1_epi32(int32_t{1} << (axis.precision - 1)), zero = _mm512_setzero_si512();
  const __m128i shift = _mm_cvtsi32_si128(axis.precision);
  for (int64_t x = 0; x < count; x += 64) {
    // The last vector is masked: masked-off bytes are neither read nor written.
    const __mmask64 mask = count - x >= 64 ? ~__mmask64{0} : (__mmask64{1} << (count - x)) - 1;
    __m512i acc[4] = {init, init, init, init}, hacc[4] = {zero, zero, zero, zero};
    for (int64_t j = 0; j < np; ++j) {
      const uint8_t* r0 = first + 2 * j * row_stride;
      const uint8_t* r1 = 2 * j + 1 < n ? r0 + row_stride : r0;
      const __m512i a = _mm512_maskz_loadu_epi8(mask, r0 + x), b = _mm512_maskz_loadu_epi8(mask, r1 + x);
      const __m512i lo = _mm512_unpacklo_epi8(a, b), hi = _mm512_unpackhi_epi8(a, b);
      const __m512i p[4] = {_mm512_unpacklo_epi8(lo, zero), _mm512_unpackhi_epi8(lo, zero),
                            _mm512_unpacklo_epi8(hi, zero), _mm512_unpackhi_epi8(hi, zero)};
      const __m512i c = _mm512_set1_epi32(cl[j]);
      for (int i = 0; i < 4; ++i) acc[i] = _mm512_add_epi32(acc[i], _mm512_madd_epi16(p[i], c));
      if (ch != nullptr) {
        const __m512i cc = _mm512_set1_epi32(ch[j]);
        for (int i = 0; i < 4; ++i) hacc[i] = _mm512_add_epi32(hacc[i], _mm512_madd_epi16(p[i], cc));
      }
    }
    for (int i = 0; i < 4; ++i) {
      if (ch != nullptr) acc[i] = _mm512_add_epi32(acc[i], _mm512_slli_epi32(hacc[i], kSplitShift));
      acc[i] = _mm512_sra_epi32(acc[i], shift);
    }
    const __m512i v = _mm512_packus_epi16(_mm512_packs_epi32(acc[0], acc[1]), _mm512_packs_epi32(acc[2], acc[3]));
    _mm512_mask_storeu_epi8(out + x, mask, v);
  }
}
#endif

inline VerticalMadd vertical_madd_for_cpu() {
#if defined(FIN_X86)
  if (cpu_capability() == CpuCapability::kAvx512) return &vertical_madd_avx512;
  if (cpu_capability() == CpuCapability::kAvx2) return &vertical_madd_avx2;
#endif
  return nullptr;
}

// One output row (output index o) of a vertical pass: out[x] for x in [0, count), from rows of `src` that are
// row_stride apart (src row 0 is input index tap_offset), column x at x * col_step. Each tap is one sweep
// along the row, which vectorizes across x; `acc` holds count int32 sums.
template <int64_t STEP>
FIN_CPU_KERNEL void vertical_row_impl(const uint8_t* src, int64_t row_stride, int64_t col_step, const int32_t* plan,
                                      int64_t o, int64_t tap_offset, int64_t count, int32_t* acc, uint8_t* out) {
  const int64_t step = STEP != 0 ? STEP : col_step;
  const ResampleAxis axis = resample_axis(plan);
  const int32_t init = int32_t{1} << (axis.precision - 1);
  for (int64_t x = 0; x < count; ++x) acc[x] = init;
  const int32_t* coeffs = axis.coeffs + o * axis.taps;
  const uint8_t* first = src + (axis.bounds[2 * o] - tap_offset) * row_stride;
  for (int32_t k = 0; k < axis.bounds[2 * o + 1]; ++k) {
    const uint8_t* r = first + k * row_stride;
    const int32_t c = coeffs[k];
    for (int64_t x = 0; x < count; ++x) acc[x] += static_cast<int32_t>(r[x * step]) * c;
  }
  const int precision = axis.precision;
  for (int64_t x = 0; x < count; ++x) {
    const int32_t v = acc[x] >> precision;
    out[x] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

template <CpuCapability cap>
FIN_CPU_KERNEL void vertical_row(const uint8_t* src, int64_t row_stride, int64_t col_step, const int32_t* plan,
                                 const PairPlan* pairs, int64_t o, int64_t tap_offset, int64_t count, int32_t* acc,
                                 uint8_t* out) {
  if (col_step == 1 && pairs != nullptr && pairs->usable) {
    if (const VerticalMadd madd = vertical_madd_for_cpu())
      return madd(src, row_stride, plan, *pairs, o, tap_offset, count, out);
  }
  if (col_step == 1) return vertical_row_impl<1>(src, row_stride, 1, plan, o, tap_offset, count, acc, out);
  vertical_row_impl<0>(src, row_stride, col_step, plan, o, tap_offset, count, acc, out);
}

// Interleaved pixels of `step` bytes (channel c at byte c) to C planes (plane c at out + c * plane_stride).
template <int64_t STEP>
FIN_CPU_KERNEL void split_rgb(const uint8_t* __restrict in, int64_t n, uint8_t* __restrict out, int64_t plane_stride) {
  uint8_t* __restrict r = out;
  uint8_t* __restrict g = out + plane_stride;
  uint8_t* __restrict b = out + 2 * plane_stride;
  for (int64_t x = 0; x < n; ++x) {
    r[x] = in[STEP * x];
    g[x] = in[STEP * x + 1];
    b[x] = in[STEP * x + 2];
  }
}

FIN_CPU_KERNEL void split_channels(const uint8_t* __restrict in, int64_t channels, int64_t step, int64_t n,
                                   uint8_t* __restrict out, int64_t plane_stride) {
  // The common cases (RGB, Pillow's RGBX) with constant strides, which the compiler vectorizes.
  if (channels == 3 && step == 3) return split_rgb<3>(in, n, out, plane_stride);
  if (channels == 3 && step == 4) return split_rgb<4>(in, n, out, plane_stride);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t x = 0; x < n; ++x) out[c * plane_stride + x] = in[x * step + c];
  }
}

// Each output column's two source columns and weights, one array each (so a loop over columns vectorizes).
struct LinearColumns {
  std::vector<int32_t> i0, i1;
  std::vector<float> l0, l1;
  void resize(int64_t n) {
    for (auto* v : {&i0, &i1}) v->resize(static_cast<size_t>(n));
    for (auto* v : {&l0, &l1}) v->resize(static_cast<size_t>(n));
  }
  size_t capacity_bytes() const {
    return (i0.capacity() + i1.capacity()) * sizeof(int32_t) + (l0.capacity() + l1.capacity()) * sizeof(float);
  }
};

// Per-thread scratch, grown as needed and kept between calls.
struct Scratch {
  std::vector<uint8_t> first, band, row;
  std::vector<unsigned char> converted;  // a band's values in the output dtype, before the patch layout
  std::vector<int32_t> acc;
  std::vector<float> cv2_first, cv2_band;  // the cv2 filters' first-pass rows and float32 band
  std::vector<int64_t> cv2_taps;           // and their columns' clamped tap offsets
  std::vector<float> cv2_band_source;      // cv2_cubic_f32: one source row as float32,
  std::vector<int32_t> cv2_band_taps;      // and each column's clamped source columns
  std::vector<float> cv2_band_coeffs;      // and coefficients
  std::vector<LinearTaps> linear_cols;     // bilinear_no_antialias_f32_cl: each column's taps
  LinearColumns linear_columns;            // bilinear_no_antialias_f32: the same, as arrays,
  std::vector<float> linear_sums;          // and two source rows' horizontal sums per channel
};
thread_local Scratch scratch;

// The first (horizontal) pass's rows [begin, end) of one image of one call, kept by a thread between bands:
// plane c at data + c * capacity * crop_w. One per frame slot: a clip-mode task resamples the same band of
// each of its group's T frames in turn, and a single entry would be evicted by the next frame every time.
struct FirstRows {
  uint64_t call = 0;
  int64_t image = -1, begin = 0, end = 0, capacity = 0;
  std::vector<uint8_t> data;
};
constexpr int64_t kFirstRowSlots = 4;  // Qwen's T is 2; a larger T shares slots (still correct, less reuse)
thread_local std::array<FirstRows, kFirstRowSlots> first_rows;
std::atomic<uint64_t> call_serial{0};  // each CPU resize call's id (from 1), for FirstRows

// A thread's buffers are sized by the largest band it resampled and kept for its next call, up to
// kKeptScratchBytes in all: above that they are freed when the thread's share of a call ends. Kept whatever
// their size, one very wide image left them for the process's lifetime (a 2 x 4,000,000 input resized
// across kept 540 MB a thread, mostly first-pass rows); a band of the largest Qwen-VL image needs about 4 MB.
constexpr size_t kKeptScratchBytes = size_t{16} << 20;

template <class T>
size_t capacity_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

void release_large_scratch() {
  size_t kept = capacity_bytes(scratch.first) + capacity_bytes(scratch.band) + capacity_bytes(scratch.row) +
                capacity_bytes(scratch.converted) + capacity_bytes(scratch.acc) + capacity_bytes(scratch.cv2_first) +
                capacity_bytes(scratch.cv2_band) + capacity_bytes(scratch.cv2_taps) +
                capacity_bytes(scratch.cv2_band_source) + capacity_bytes(scratch.cv2_band_taps) +
                capacity_bytes(scratch.cv2_band_coeffs) + capacity_bytes(scratch.linear_cols) +
                scratch.linear_columns.capacity_bytes() + capacity_bytes(scratch.linear_sums);
  for (const FirstRows& f : first_rows) kept += capacity_bytes(f.data);
#if defined(FIN_RESAMPLE_ROWS16)
  kept += capacity_bytes(pair_columns) + capacity_bytes(row_columns) + capacity_bytes(row_results);
#endif
  if (kept <= kKeptScratchBytes) return;
  scratch = Scratch{};
  for (FirstRows& f : first_rows) f = FirstRows{};
#if defined(FIN_RESAMPLE_ROWS16)
  std::vector<PairColumn>().swap(pair_columns);
  std::vector<u8x16>().swap(row_columns);
  std::vector<u8x16>().swap(row_results);
#endif
}

// The resampled uint8 rows [y0, y1) of the crop of image b, every channel, into band: channel c's row y (crop_w
// bytes) at band + c * plane + y * pitch (a padded canvas's band is wider than the crop). `slot`: the frame's
// place in its temporal group (0 for a still), which FirstRows entry keeps its first-pass rows.
template <CpuCapability cap>
FIN_CPU_KERNEL void resample_band(const ResizePlan& p, const PairPlans* pairs, uint64_t call, const uint8_t* input,
                                  int64_t b, int64_t slot, int64_t y0, int64_t y1, uint8_t* band, int64_t plane,
                                  int64_t pitch) {
  const PairPlan* row_pairs = pairs != nullptr ? &pairs->row : nullptr;
  const PairPlan* col_pairs = pairs != nullptr ? &pairs->col : nullptr;
  const int64_t C = p.channels, w = p.crop_w, rows = y1 - y0;
  const int64_t sb = p.strides[0], sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  Scratch& s = scratch;
  const uint8_t* image = input + b * sb;
  if (!p.row_plan && !p.col_plan) {  // no pass: the crop's rows, as planes
    const uint8_t* first = image + (p.top + y0) * sh + p.left * sw;
    for (int64_t y = 0; y < rows; ++y) {
      const uint8_t* row = first + y * sh;
      if (interleaved_pixels(sc, sw, C)) {
        split_channels(row, C, sw, w, band + y * pitch, plane);
      } else {
        for (int64_t c = 0; c < C; ++c) {
          uint8_t* to = band + c * plane + y * pitch;
          if (sw == 1) {
            std::memcpy(to, row + c * sc, static_cast<size_t>(w));
          } else {
            for (int64_t x = 0; x < w; ++x) to[x] = row[c * sc + x * sw];
          }
        }
      }
    }
  } else if (!p.row_plan) {  // horizontal only
    horizontal_pass<cap>(image + (p.top + y0) * sh, sc, sh, sw, C, rows, 0, p.col_plan, col_pairs, p.left, w, band,
                         plane, pitch);
  } else if (p.two_passes() && !p.vertical_first) {
    // Horizontal first: the input rows this band's vertical taps read, resampled across. Neighbouring bands'
    // taps overlap, and the pass runs 16 rows at a time: a thread keeps the rows it made for its previous band
    // of the same call and image (the bands of a task range come in order), and makes new rows in whole
    // blocks of 16, so each input row is resampled about once instead of ~1.25 times (4032x3024 -> 1148x840).
    const auto first = resample_bounds(p.in_h, p.out_h, p.filter, p.top + y0);
    const auto last = resample_bounds(p.in_h, p.out_h, p.filter, p.top + y1 - 1);
    const int64_t r0 = first[0], r1 = last[0] + last[1];
    FirstRows& f = first_rows[static_cast<size_t>(slot % kFirstRowSlots)];
    int64_t have = r0;
    if (f.call == call && f.image == b && f.begin <= r0 && r0 <= f.end && f.capacity >= r1 - r0 + 16) {
      const int64_t kept = f.end - r0;
      if (r0 > f.begin && kept > 0) {
        for (int64_t c = 0; c < C; ++c) {
          uint8_t* plane = f.data.data() + c * f.capacity * w;
          std::memmove(plane, plane + (r0 - f.begin) * w, static_cast<size_t>(kept * w));
        }
      }
      have = std::max(f.end, r0);
    } else if (f.capacity < r1 - r0 + 16 || static_cast<int64_t>(f.data.size()) < C * f.capacity * w) {
      f.capacity = r1 - r0 + 32;
      f.data.resize(static_cast<size_t>(C * f.capacity * w));
    }
    if (have < r1) {
      const int64_t end = std::min(p.in_h, have + (r1 - have + 15) / 16 * 16);
      horizontal_pass<cap>(image + have * sh, sc, sh, sw, C, end - have, 0, p.col_plan, col_pairs, p.left, w,
                           f.data.data() + (have - r0) * w, f.capacity * w, w);
      have = end;
    }
    f.call = call;
    f.image = b;
    f.begin = r0;
    f.end = have;
    s.acc.resize(static_cast<size_t>(w));
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t* h = f.data.data() + c * f.capacity * w;
      for (int64_t y = 0; y < rows; ++y) {
        vertical_row<cap>(h, w, 1, p.row_plan, row_pairs, p.top + y0 + y, r0, w, s.acc.data(),
                          band + c * plane + y * pitch);
      }
    }
  } else {
    // Vertical first, or vertical only: this band's rows resampled down, over the input columns the
    // horizontal taps read [q0, q0 + q) (or the crop's). Interleaved channels (HWC) are resampled as one
    // contiguous row of bytes, then split into planes.
    const bool only = !p.two_passes();
    const int64_t q0 = only ? p.left : p.first_begin, q = only ? w : p.first_end - p.first_begin;
    // Vertical only: straight into the band; otherwise the first pass's planes [C][rows][q].
    uint8_t* planes = band;
    int64_t planes_plane = plane, planes_pitch = pitch;
    if (!only) {
      s.first.resize(static_cast<size_t>(C * rows * q));
      planes = s.first.data();
      planes_plane = rows * q;
      planes_pitch = q;
    }
    const bool interleaved = interleaved_pixels(sc, sw, C);
    s.acc.resize(static_cast<size_t>(q * std::max(C, sw)));
    s.row.resize(static_cast<size_t>(q * std::max(C, sw)));
    for (int64_t y = 0; y < rows; ++y) {
      const int64_t o = p.top + y0 + y;
      if (interleaved) {
        uint8_t* row = s.row.data();
        // Up to the last channel of the last pixel: its padding may lie past the tensor.
        vertical_row<cap>(image + q0 * sw, sh, 1, p.row_plan, row_pairs, o, 0, (q - 1) * sw + C, s.acc.data(), row);
        split_channels(row, C, sw, q, planes + y * planes_pitch, planes_plane);
      } else {
        for (int64_t c = 0; c < C; ++c) {
          vertical_row<cap>(image + c * sc + q0 * sw, sh, sw, p.row_plan, row_pairs, o, 0, q, s.acc.data(),
                            planes + c * planes_plane + y * planes_pitch);
        }
      }
    }
    if (!only)
      horizontal_pass<cap>(planes, rows * q, q, 1, C, rows, q0, p.col_plan, col_pairs, p.left, w, band, plane, pitch);
  }
}

// The canvas's rows [y0, y0 + rows) of image b (or frame b of a clip), every channel, into band[C][rows][canvas_w]:
// the crop's rows that fall in the band resampled in place at column pad_left, every other byte the fill. The
// fill is written after the resampling, so a pass never overwrites it. Without padding the band is the crop's.
template <CpuCapability cap>
FIN_CPU_KERNEL void canvas_band(const ResizePlan& p, const PairPlans* pairs, uint64_t call, const uint8_t* input,
                                int64_t b, int64_t slot, int64_t y0, int64_t rows, uint8_t* band) {
  const int64_t width = p.canvas_w, plane = rows * width;
  // The band's rows that hold the crop: [box0, box1), empty in a band of padding only.
  const int64_t box0 = std::clamp<int64_t>(p.pad_top - y0, 0, rows);
  const int64_t box1 = std::clamp<int64_t>(p.pad_top + p.crop_h - y0, 0, rows);
  if (box0 < box1) {
    const int64_t from = y0 + box0 - p.pad_top;
    resample_band<cap>(p, pairs, call, input, b, slot, from, from + box1 - box0, band + box0 * width + p.pad_left,
                       plane, width);
  }
  if (p.canvas_h == p.crop_h && p.canvas_w == p.crop_w) return;
  const int fill = static_cast<int>(p.fill);
  const int64_t right = p.pad_left + p.crop_w;
  for (int64_t c = 0; c < p.channels; ++c) {
    uint8_t* rows_of = band + c * plane;
    std::memset(rows_of, fill, static_cast<size_t>(box0 * width));
    for (int64_t y = box0; y < box1; ++y) {
      std::memset(rows_of + y * width, fill, static_cast<size_t>(p.pad_left));
      std::memset(rows_of + y * width + right, fill, static_cast<size_t>(width - right));
    }
    std::memset(rows_of + box1 * width, fill, static_cast<size_t>((rows - box1) * width));
  }
}

// cv2_canvas_band's float32 filter (cv2_cubic_f32), the same sums in the same order as cv2_horizontal_sum and
// cv2_vertical_sum, written as whole-row loops the compiler vectorizes: each source row converted to float once
// (not once per tap), the vertical pass four rows at a time, split where OpenCV's SIMD loop ends. No product may
// be fused into a sum (OpenCV's SSE/NEON code rounds each): contraction is off for this function (GCC's
// attribute, clang's pragma), and the x86 baseline it is compiled for has no FMA.
FIN_NO_FP_CONTRACT_ATTR inline void cv2_float_band(const ResizePlan& p, const uint8_t* image, int64_t r0, int64_t n,
                                                   int64_t from, int64_t count, const int32_t* col_coeffs,
                                                   const int32_t* row_coeffs, float* h, float* to, int64_t plane,
                                                   int64_t width) {
  FIN_NO_FP_CONTRACT
  const int64_t C = p.channels, w = p.crop_w, sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  std::vector<float>& source = scratch.cv2_band_source;
  source.resize(static_cast<size_t>(p.in_w));
  std::vector<int32_t>& taps = scratch.cv2_band_taps;    // each column's 4 clamped source columns
  std::vector<float>& coeffs = scratch.cv2_band_coeffs;  // and their coefficients (the plan's bit patterns)
  taps.resize(static_cast<size_t>(4 * w));
  coeffs.resize(static_cast<size_t>(4 * w));
  for (int64_t x = 0; x < w; ++x) {
    const int64_t tap0 = p.col_plan[PlanHeader::kSize + 2 * (p.left + x)];
    for (int k = 0; k < 4; ++k) {
      taps[4 * x + k] = static_cast<int32_t>(cv2_clamp_index(tap0 + k, p.in_w));
      coeffs[4 * x + k] = bits_as_float(static_cast<uint32_t>(col_coeffs[4 * x + k]));
    }
  }
  const float* a = coeffs.data();
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* row = image + c * sc + (r0 + r) * sh;
      float* f = source.data();
      for (int64_t i = 0; i < p.in_w; ++i) f[i] = static_cast<float>(row[i * sw]);
      float* out = h + (c * n + r) * w;
      for (int64_t x = 0; x < w; ++x) {
        const int32_t* t = taps.data() + 4 * x;
        const float* ax = a + 4 * x;
        float v = f[t[0]] * ax[0];
        v = v + f[t[1]] * ax[1];
        v = v + f[t[2]] * ax[2];
        out[x] = v + f[t[3]] * ax[3];
      }
    }
  }
  const int64_t simd_end = p.out_w * C / cv2_cubic::kFloatLanes * cv2_cubic::kFloatLanes;
  for (int64_t y = 0; y < count; ++y) {
    const int64_t tap0 = p.row_plan[PlanHeader::kSize + 2 * (from + y)];
    const int32_t* b = row_coeffs + cv2_cubic::kTaps * y;
    const float b0 = bits_as_float(static_cast<uint32_t>(b[0])), b1 = bits_as_float(static_cast<uint32_t>(b[1]));
    const float b2 = bits_as_float(static_cast<uint32_t>(b[2])), b3 = bits_as_float(static_cast<uint32_t>(b[3]));
    for (int64_t c = 0; c < C; ++c) {
      const float* plane_of = h + c * n * w;
      const float* s0 = plane_of + cv2_clamp_index(cv2_clamp_index(tap0, p.in_h) - r0, n) * w;
      const float* s1 = plane_of + cv2_clamp_index(cv2_clamp_index(tap0 + 1, p.in_h) - r0, n) * w;
      const float* s2 = plane_of + cv2_clamp_index(cv2_clamp_index(tap0 + 2, p.in_h) - r0, n) * w;
      const float* s3 = plane_of + cv2_clamp_index(cv2_clamp_index(tap0 + 3, p.in_h) - r0, n) * w;
      float* out = to + c * plane + y * width;
      // Element (left + x) * C + c of the output row is in OpenCV's SIMD loop while below simd_end.
      const int64_t split = std::clamp<int64_t>((simd_end - c + C - 1) / C - p.left, 0, w);
      for (int64_t x = 0; x < split; ++x) out[x] = s0[x] * b0 + (s1[x] * b1 + (s2[x] * b2 + s3[x] * b3));
      for (int64_t x = split; x < w; ++x) out[x] = ((s0[x] * b0 + s1[x] * b1) + s2[x] * b2) + s3[x] * b3;
    }
  }
}

// A float32 band of the canvas (cv2_canvas_band's, torch_float_canvas_band's): filled with the fill byte where it
// holds padding; then the crop's resized rows [from, from + count) of image b (`image`: its first element) go to
// `to` (row y, channel c at to + c * rows * canvas_w + y * canvas_w); count 0 where the band holds none of them.
template <typename in_t>
struct FloatBandBox {
  const in_t* image;
  float* to;
  int64_t from, count;
};

template <typename in_t>
FloatBandBox<in_t> float_band_box(const ResizePlan& p, const in_t* input, int64_t b, int64_t y0, int64_t rows,
                                  float* band) {
  const int64_t box0 = std::clamp<int64_t>(p.pad_top - y0, 0, rows);
  const int64_t box1 = std::clamp<int64_t>(p.pad_top + p.crop_h - y0, 0, rows);
  if (box0 > 0 || box1 < rows || p.crop_w < p.canvas_w) {  // the band holds padding: the rest is overwritten
    std::fill(band, band + p.channels * rows * p.canvas_w, static_cast<float>(p.fill));
  }
  return {input + b * p.strides[0], band + box0 * p.canvas_w + p.pad_left, p.top + y0 + box0 - p.pad_top,
          std::max<int64_t>(box1 - box0, 0)};
}

// canvas_band for the cv2 filters: float32 values (the first pass's float rows, and in float32 mode the
// results, are not bytes), by the shared per-element code the GPU kernels run (resample_kernel.h), so every
// backend sums in OpenCV's order. The band's first-pass rows are made for it alone.
inline void cv2_canvas_band(const ResizePlan& p, const uint8_t* input, int64_t b, int64_t y0, int64_t rows,
                            float* band) {
  const auto [image, to, from, count] = float_band_box(p, input, b, y0, rows, band);
  if (count == 0) return;
  const int64_t width = p.canvas_w, plane = rows * width, C = p.channels, w = p.crop_w;
  const int64_t sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  if (!p.two_passes()) {  // the image keeps its size: the crop's bytes, as OpenCV copies
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < count; ++y) {
        const uint8_t* row = image + c * sc + (from + y) * sh + p.left * sw;
        for (int64_t x = 0; x < w; ++x) to[c * plane + y * width + x] = row[x * sw];
      }
    }
    return;
  }
  const auto first = resample_bounds(p.in_h, p.out_h, p.filter, from);
  const auto last = resample_bounds(p.in_h, p.out_h, p.filter, from + count - 1);
  const int64_t r0 = first[0], n = last[0] + last[1] - r0;
  // The taps of each column and row are the same for every row and column: their clamped indices and
  // coefficients looked up once, then the shared sums (cv2_horizontal_sum, cv2_vertical_sum) per element.
  const bool fixed = p.col_plan[PlanHeader::kPrecision] != 0;
  const int64_t out_w = p.col_plan[PlanHeader::kOutSize], out_h = p.row_plan[PlanHeader::kOutSize];
  const int32_t* col_coeffs = p.col_plan + PlanHeader::kSize + 2 * out_w + cv2_cubic::kTaps * p.left;
  const int32_t* row_coeffs = p.row_plan + PlanHeader::kSize + 2 * out_h + cv2_cubic::kTaps * from;
  std::vector<float>& h = scratch.cv2_first;
  h.resize(static_cast<size_t>(C * n * w));
  if (!fixed) {
    cv2_float_band(p, image, r0, n, from, count, col_coeffs, row_coeffs, h.data(), to, plane, width);
    return;
  }
  std::vector<int64_t>& taps = scratch.cv2_taps;
  taps.resize(static_cast<size_t>(4 * w));
  for (int64_t x = 0; x < w; ++x) {
    const int64_t tap0 = p.col_plan[PlanHeader::kSize + 2 * (p.left + x)];
    for (int k = 0; k < 4; ++k) taps[4 * x + k] = cv2_clamp_index(tap0 + k, p.in_w) * sw;
  }
  const int64_t row_len = p.out_w * C;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* row = image + c * sc + (r0 + r) * sh;
      float* out = h.data() + (c * n + r) * w;
      for (int64_t x = 0; x < w; ++x) {
        const int64_t* t = taps.data() + 4 * x;
        const float v[4] = {static_cast<float>(row[t[0]]), static_cast<float>(row[t[1]]), static_cast<float>(row[t[2]]),
                            static_cast<float>(row[t[3]])};
        out[x] = cv2_horizontal_sum(v, col_coeffs + cv2_cubic::kTaps * x, fixed);
      }
    }
  }
  for (int64_t y = 0; y < count; ++y) {
    const int64_t tap0 = p.row_plan[PlanHeader::kSize + 2 * (from + y)];
    const int32_t* coeffs = row_coeffs + cv2_cubic::kTaps * y;
    int64_t rows_of[4];
    for (int k = 0; k < 4; ++k) rows_of[k] = cv2_clamp_index(cv2_clamp_index(tap0 + k, p.in_h) - r0, n) * w;
    for (int64_t c = 0; c < C; ++c) {
      const float* plane_of = h.data() + c * n * w;
      float* out = to + c * plane + y * width;
      for (int64_t x = 0; x < w; ++x) {
        const float v[4] = {plane_of[rows_of[0] + x], plane_of[rows_of[1] + x], plane_of[rows_of[2] + x],
                            plane_of[rows_of[3] + x]};
        out[x] = cv2_vertical_sum(v, coeffs, fixed, cv2_simd_lane((p.left + x) * C + c, row_len, fixed));
      }
    }
  }
}

template <CpuCapability cap>
struct CapabilityFma {
  FIN_CPU_KERNEL float operator()(float a, float b, float c) const { return affine_on<cap>(a, b, c); }
};

// torch's generic float32 bilinear is separable: each output row is fma(t0, l0, t1 * l1) over the horizontal sums
// t of its two source rows, each fma(x0, c0, x1 * c1). So where output rows share source rows (an upscale), the
// band sums each source row it reads once and keeps it for the next output row, then combines whole rows (that
// loop vectorizes); the same bits as the per-element sum (the capability's fma, one rounding as linear_f32_sum's;
// each product is an fma's addend, which no contraction can fuse). Measured on a 2-core EPYC (AVX-512), 480x640 ->
// 756x1008 at one thread: 2.4 ms against the per-element loop's 4.3; on a downscale, where no row is read twice,
// it was slower (12 MP -> 1134x1512: 22.7 against 16.1 ms), so downscales keep the per-element loop.
template <CpuCapability cap, typename in_t>
FIN_CPU_KERNEL void linear_f32_separable_band(const ResizePlan& p, const in_t* image, int64_t from, int64_t count,
                                              float* to, int64_t plane, int64_t width) {
  const int64_t C = p.channels, w = p.crop_w, sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  LinearColumns& cols = scratch.linear_columns;
  cols.resize(w);
  for (int64_t x = 0; x < w; ++x) {
    const LinearTaps t = linear_f32_taps(p.col_plan, p.left + x, p.in_w);
    cols.i0[x] = static_cast<int32_t>(t.i0 * sw);  // element offsets in the row (fits: linear_columns_fit)
    cols.i1[x] = static_cast<int32_t>(t.i1 * sw);
    cols.l0[x] = t.l0;
    cols.l1[x] = t.l1;
  }
  // Two slots of summed rows per channel, each tagged with its source row.
  std::vector<float>& sums = scratch.linear_sums;
  sums.resize(static_cast<size_t>(2 * C * w));
  int64_t slot_row[2] = {-1, -1};
  const auto summed = [&](int64_t src_row, int64_t keep) FIN_CPU_KERNEL_LAMBDA -> int64_t {
    for (int64_t s = 0; s < 2; ++s) {
      if (slot_row[s] == src_row) return s;
    }
    const int64_t s = slot_row[0] == keep ? 1 : 0;
    slot_row[s] = src_row;
    const int32_t *i0 = cols.i0.data(), *i1 = cols.i1.data();
    const float *l0 = cols.l0.data(), *l1 = cols.l1.data();
    for (int64_t c = 0; c < C; ++c) {
      const in_t* f = image + c * sc + src_row * sh;
      float* out = sums.data() + (s * C + c) * w;
      for (int64_t x = 0; x < w; ++x) {
        out[x] = affine_on<cap>(static_cast<float>(f[i0[x]]), l0[x], static_cast<float>(f[i1[x]]) * l1[x]);
      }
    }
    return s;
  };
  if (p.out_h <= p.in_h) {  // no source row is read twice: each output element from its four pixels at once
    const int32_t *i0 = cols.i0.data(), *i1 = cols.i1.data();
    const float *l0 = cols.l0.data(), *l1 = cols.l1.data();
    for (int64_t y = 0; y < count; ++y) {
      const LinearTaps row = linear_f32_taps(p.row_plan, from + y, p.in_h);
      for (int64_t c = 0; c < C; ++c) {
        const in_t* f0 = image + c * sc + row.i0 * sh;
        const in_t* f1 = image + c * sc + row.i1 * sh;
        float* out = to + c * plane + y * width;
        for (int64_t x = 0; x < w; ++x) {
          const float t0 = affine_on<cap>(static_cast<float>(f0[i0[x]]), l0[x], static_cast<float>(f0[i1[x]]) * l1[x]);
          const float t1 = affine_on<cap>(static_cast<float>(f1[i0[x]]), l0[x], static_cast<float>(f1[i1[x]]) * l1[x]);
          out[x] = affine_on<cap>(t0, row.l0, t1 * row.l1);
        }
      }
    }
    return;
  }
  for (int64_t y = 0; y < count; ++y) {
    const LinearTaps row = linear_f32_taps(p.row_plan, from + y, p.in_h);
    const int64_t s0 = summed(row.i0, row.i1), s1 = summed(row.i1, row.i0);
    for (int64_t c = 0; c < C; ++c) {
      const float* t0 = sums.data() + (s0 * C + c) * w;
      const float* t1 = sums.data() + (s1 * C + c) * w;
      float* out = to + c * plane + y * width;
      for (int64_t x = 0; x < w; ++x) out[x] = affine_on<cap>(t0[x], row.l0, t1[x] * row.l1);
    }
  }
}

// canvas_band for the float32 bilinear: float32 values, each the shared per-element sum the GPU kernels run
// (linear_f32_sum, with the capability's one-rounding fma), with each row's and column's taps looked up once;
// torch's generic kernel on an upscale row by row (linear_f32_separable_band).
template <CpuCapability cap, typename in_t>
FIN_CPU_KERNEL void linear_f32_canvas_band_of(const ResizePlan& p, const in_t* input, int64_t b, int64_t y0,
                                              int64_t rows, float* band) {
  const auto [image, to, from, count] = float_band_box(p, input, b, y0, rows, band);
  if (count == 0) return;
  const int64_t width = p.canvas_w, plane = rows * width, C = p.channels, w = p.crop_w;
  const int64_t sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  const bool products = p.filter == ResampleFilter::kBilinearFloatChannelsLast;
  if (!products && p.in_w * sw <= INT32_MAX) {
    linear_f32_separable_band<cap>(p, image, from, count, to, plane, width);
    return;
  }
  std::vector<LinearTaps>& cols = scratch.linear_cols;
  cols.resize(static_cast<size_t>(w));
  for (int64_t x = 0; x < w; ++x) {
    LinearTaps t = linear_f32_taps(p.col_plan, p.left + x, p.in_w);
    t.i0 *= sw;  // element offsets in the row
    t.i1 *= sw;
    cols[x] = t;
  }
  for (int64_t y = 0; y < count; ++y) {
    const LinearTaps row = linear_f32_taps(p.row_plan, from + y, p.in_h);
    for (int64_t c = 0; c < C; ++c) {
      const in_t* r0 = image + c * sc + row.i0 * sh;
      const in_t* r1 = image + c * sc + row.i1 * sh;
      float* out = to + c * plane + y * width;
      for (int64_t x = 0; x < w; ++x) {
        const LinearTaps& t = cols[x];
        out[x] =
            linear_f32_sum(static_cast<float>(r0[t.i0]), static_cast<float>(r0[t.i1]), static_cast<float>(r1[t.i0]),
                           static_cast<float>(r1[t.i1]), row, t, products, CapabilityFma<cap>{});
      }
    }
  }
}

// out[x] = src[x] * weight (first) or out[x] + src[x] * weight, the product rounded on its own: torch's blocks of
// rounded products (aa_f32_sum), a row at a time. Not a kernel of a capability: compiled without contraction, so no
// FMA absorbs the product (a call per row, vectorized for the baseline ISA).
FIN_NO_FP_CONTRACT_ATTR inline void add_rounded_products(float* __restrict out, const float* __restrict src,
                                                         float weight, int64_t n, bool first) {
  FIN_NO_FP_CONTRACT
  if (first) {
    for (int64_t x = 0; x < n; ++x) out[x] = src[x] * weight;
    return;
  }
  for (int64_t x = 0; x < n; ++x) out[x] = out[x] + src[x] * weight;
}

// canvas_band for torch's float32 antialiased filters (float32 values, like cv2_canvas_band): where the height
// changes, the band's horizontal-pass rows (the input rows its output rows read, for the crop's columns; the
// crop's columns themselves where the width keeps its size) into scratch, then the vertical sums a row at a time;
// otherwise the one pass straight into the band. The horizontal values are aa_f32_sum, the GPU kernels' per-element
// sum, with the capability's fma; the vertical ones the same operations in the same order per element.
template <CpuCapability cap, typename in_t>
FIN_CPU_KERNEL void aa_f32_canvas_band_of(const ResizePlan& p, const in_t* input, int64_t b, int64_t y0, int64_t rows,
                                          float* band) {
  const auto [image, to, from, count] = float_band_box(p, input, b, y0, rows, band);
  if (count == 0) return;
  const int64_t width = p.canvas_w, plane = rows * width, C = p.channels, w = p.crop_w;
  const int64_t sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  const CapabilityFma<cap> fma;
  // One row of the horizontal pass (or the crop's columns copied): input row r of channel c into out[0, w).
  const auto across = [&](int64_t c, int64_t r, float* out) FIN_CPU_KERNEL_LAMBDA {
    const in_t* row = image + c * sc + r * sh;
    if (p.col_plan == nullptr) {
      for (int64_t x = 0; x < w; ++x) out[x] = static_cast<float>(row[(p.left + x) * sw]);
      return;
    }
    const int32_t* bounds = p.col_plan + PlanHeader::kSize + 2 * p.left;
    const int64_t taps = p.col_plan[PlanHeader::kTaps];
    const int32_t* coeffs = p.col_plan + PlanHeader::kSize + 2 * p.out_w + taps * p.left;
    for (int64_t x = 0; x < w; ++x) {
      out[x] = aa_f32_sum(row + bounds[2 * x] * sw, sw, coeffs + taps * x, bounds[2 * x + 1], fma);
    }
  };
  if (p.row_plan == nullptr) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < count; ++y) across(c, from + y, to + c * plane + y * width);
    }
    return;
  }
  const auto first = resample_bounds(p.in_h, p.out_h, p.filter, from);
  const auto last = resample_bounds(p.in_h, p.out_h, p.filter, from + count - 1);
  const int64_t r0 = first[0], n = last[0] + last[1] - r0;
  std::vector<float>& h = scratch.cv2_first;
  h.resize(static_cast<size_t>(C * n * w));
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t r = 0; r < n; ++r) across(c, r0 + r, h.data() + (c * n + r) * w);
  }
  // The vertical sums a row at a time: per tap, one loop over the row, so each element gets aa_f32_sum's operations
  // in its order (the rounded products' blocks by add_rounded_products, the fused taps by the capability's fma).
  const int64_t taps = p.row_plan[PlanHeader::kTaps];
  for (int64_t y = 0; y < count; ++y) {
    const int32_t* bounds = p.row_plan + PlanHeader::kSize + 2 * (from + y);
    const int32_t* coeffs = p.row_plan + PlanHeader::kSize + 2 * p.out_h + taps * (from + y);
    const int64_t n_taps = bounds[1], fused = aa_f32_fused_taps(n_taps);
    for (int64_t c = 0; c < C; ++c) {
      const float* rows_of = h.data() + (c * n + bounds[0] - r0) * w;
      float* out = to + c * plane + y * width;
      if (n_taps == 0) std::fill(out, out + w, 0.0f);
      for (int64_t j = 0; j < n_taps - fused; ++j)
        add_rounded_products(out, rows_of + j * w, plan_weight(coeffs, j), w, j == 0);
      for (int64_t j = n_taps - fused; j < n_taps; ++j) {
        const float* row = rows_of + j * w;
        const float weight = plan_weight(coeffs, j);
        for (int64_t x = 0; x < w; ++x) out[x] = affine_on<cap>(row[x], weight, out[x]);
      }
    }
  }
}

// The float32 band of torch's float filters (linear_f32, and the float32 antialiased filters), for the input's
// first element, uint8 or float32 as p.float_input says (as the GPU passes take it).
template <CpuCapability cap>
FIN_CPU_KERNEL void torch_float_canvas_band(const ResizePlan& p, const void* input, int64_t b, int64_t y0, int64_t rows,
                                            float* band) {
  const auto of = [&](const auto* typed) FIN_CPU_KERNEL_LAMBDA {
    if (is_linear_f32(p.filter)) {
      linear_f32_canvas_band_of<cap>(p, typed, b, y0, rows, band);
    } else {
      aa_f32_canvas_band_of<cap>(p, typed, b, y0, rows, band);
    }
  };
  if (p.float_input) {
    of(static_cast<const float*>(input));
  } else {
    of(static_cast<const uint8_t*>(input));
  }
}

// A band of P * m rows of [C][P * m][width] values (already in the output dtype) as Qwen-VL's patch rows: the
// band's (width / (P m)) x m x m patches, each C x T x P x P. frame_stride: where frame t's band is (conv + t *
// frame_stride, a clip's group), or 0 for a still, whose T frames are one: the first's block is copied.
template <typename out_t>
void cut_patch_rows(const out_t* conv, int64_t width, int64_t C, int64_t P, int64_t m, int64_t T, int64_t frame_stride,
                    out_t* out) {
  const int64_t factor = P * m, gw = width / factor, plane = factor * width, block = P * P;
  const size_t run = static_cast<size_t>(P) * sizeof(out_t);
  for (int64_t gx = 0; gx < gw; ++gx) {
    for (int64_t my = 0; my < m; ++my) {
      for (int64_t mx = 0; mx < m; ++mx) {
        const out_t* from = conv + my * P * width + gx * factor + mx * P;
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t t = 0; t < T; ++t) {
            out_t* to = out + t * block;
            if (t > 0 && frame_stride == 0) {
              std::memcpy(to, out, static_cast<size_t>(block) * sizeof(out_t));
              continue;
            }
            const out_t* run_from = from + c * plane + t * frame_stride;
            if (P == 14) {  // Qwen2-VL / 2.5-VL: a constant-size copy is two vector moves, not a call
              for (int64_t py = 0; py < 14; ++py) std::memcpy(to + py * 14, run_from + py * width, 14 * sizeof(out_t));
            } else if (P == 16) {  // Qwen3-VL
              for (int64_t py = 0; py < 16; ++py) std::memcpy(to + py * 16, run_from + py * width, 16 * sizeof(out_t));
            } else {
              for (int64_t py = 0; py < P; ++py) std::memcpy(to + py * P, run_from + py * width, run);
            }
          }
          out += T * block;
        }
      }
    }
  }
}

// cut_patch_rows with each row laid out channel-last, [T, P, P, C] (Gemma 4's and LFM2-VL's patches): pixel
// (py, px) of a patch is its C channels' values, one after another. The band is converted channel-first as for
// cut_patch_rows (the affine's vector loop over whole rows), and interleaved here from the cache, in the one
// write of the output: the core's transpose of channel-first rows after the op read and wrote the whole output
// again (~5 ms for LFM2-VL's 9 x 1024 x 768 float32 at 1080p).
template <typename out_t>
void cut_patch_rows_channels_last(const out_t* conv, int64_t width, int64_t C, int64_t P, int64_t m, int64_t T,
                                  int64_t frame_stride, out_t* out) {
  const int64_t factor = P * m, gw = width / factor, plane = factor * width, block = P * P * C;
  for (int64_t gx = 0; gx < gw; ++gx) {
    for (int64_t my = 0; my < m; ++my) {
      for (int64_t mx = 0; mx < m; ++mx) {
        const out_t* from = conv + my * P * width + gx * factor + mx * P;
        for (int64_t t = 0; t < T; ++t) {
          out_t* to = out + t * block;
          if (t > 0 && frame_stride == 0) {
            std::memcpy(to, out, static_cast<size_t>(block) * sizeof(out_t));
            continue;
          }
          for (int64_t py = 0; py < P; ++py) {
            const out_t* run = from + t * frame_stride + py * width;
            out_t* pixels = to + py * P * C;
            if (C == 3) {  // RGB: three runs interleaved, constant strides the compiler vectorizes
              const out_t *r = run, *g = run + plane, *b = run + 2 * plane;
              for (int64_t px = 0; px < P; ++px) {
                pixels[3 * px] = r[px];
                pixels[3 * px + 1] = g[px];
                pixels[3 * px + 2] = b[px];
              }
            } else {
              for (int64_t px = 0; px < P; ++px) {
                for (int64_t c = 0; c < C; ++c) pixels[px * C + c] = run[c * plane + px];
              }
            }
          }
        }
        out += T * block;
      }
    }
  }
}

#if defined(FIN_X86)
// cut_patch_rows for float32 or bfloat16 output (out_t float or uint16_t) straight from the uint8 band (P = 14
// or 16), with no converted copy of the band in between: each P-pixel run loaded once, converted, one FMA (as
// affine_on: a single rounding, so float32 is affine_on's value), for bfloat16 rounded as from_float does (to
// nearest even, NaN -> 0x7FC0), stored; frame_stride as cut_patch_rows' (in band bytes; 0: the first frame's
// block copied). The band must have 16 readable bytes past every run's start (the caller pads it).
// 16 float32 values as bfloat16 bits, rounded as from_float does (to nearest even, NaN -> 0x7FC0).
FIN_TARGET_AVX512_MADD inline __m256i bfloat16_bits_avx512(__m512 f) {
  const __m512i half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), nan = _mm512_set1_epi32(0x7FC0);
  const __m512i u = _mm512_castps_si512(f);
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, half), _mm512_and_si512(_mm512_srli_epi32(u, 16), one));
  r = _mm512_mask_mov_epi32(_mm512_srli_epi32(r, 16), _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), nan);
  return _mm512_cvtepi32_epi16(r);
}

// 16 bytes from `run` as float32, x * w + b in one rounding (affine_on's).
FIN_TARGET_AVX512_MADD inline __m512 affine_run16_avx512(const uint8_t* run, __m512 w, __m512 b) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(run));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), w, b);
}

template <typename out_t>
FIN_TARGET_AVX512_MADD void cut_patch_rows_from_band_avx512(const uint8_t* band, int64_t width, int64_t C, int64_t P,
                                                            int64_t m, int64_t T, int64_t frame_stride,
                                                            const float* weight, const float* bias, out_t* out) {
  const int64_t factor = P * m, gw = width / factor, plane = factor * width, block = P * P;
  const __mmask16 keep = static_cast<__mmask16>((1u << P) - 1);
  for (int64_t gx = 0; gx < gw; ++gx) {
    for (int64_t my = 0; my < m; ++my) {
      for (int64_t mx = 0; mx < m; ++mx) {
        const uint8_t* from = band + my * P * width + gx * factor + mx * P;
        for (int64_t c = 0; c < C; ++c) {
          const __m512 wv = _mm512_set1_ps(weight[c]), bv = _mm512_set1_ps(bias[c]);
          for (int64_t t = 0; t < T; ++t) {
            out_t* to = out + t * block;
            if (t > 0 && frame_stride == 0) {
              std::memcpy(to, out, static_cast<size_t>(block) * sizeof(out_t));
              continue;
            }
            const uint8_t* run_from = from + c * plane + t * frame_stride;
            for (int64_t py = 0; py < P; ++py) {
              const __m512 f = affine_run16_avx512(run_from + py * width, wv, bv);
              if constexpr (std::is_same_v<out_t, float>) {
                _mm512_mask_storeu_ps(to + py * P, keep, f);
              } else {
                _mm256_mask_storeu_epi16(to + py * P, keep, bfloat16_bits_avx512(f));
              }
            }
          }
          out += T * block;
        }
      }
    }
  }
}

// cut_patch_rows_channels_last for RGB, float32 or bfloat16 output, straight from the uint8 band (P = 14 or 16),
// as cut_patch_rows_from_band_avx512 is for cut_patch_rows: each pixel row of a patch is its three channels'
// runs loaded, converted and FMA'd (affine_on's one rounding), then interleaved by two permutes per 16 values
// (pixel e / 3, channel e % 3 of value e) and stored, 3 P values. The band needs 16 readable bytes past every
// run's start (the caller pads it).
template <typename out_t>
FIN_TARGET_AVX512_MADD void cut_rgb_patch_rows_channels_last_from_band_avx512(const uint8_t* band, int64_t width,
                                                                              int64_t P, int64_t m, int64_t T,
                                                                              int64_t frame_stride, const float* weight,
                                                                              const float* bias, out_t* out) {
  constexpr int64_t C = 3;
  const int64_t factor = P * m, gw = width / factor, plane = factor * width, block = P * P * C;
  // Value j of output vector k (value e = 16 k + j of the pixel row): red and green of pixel e / 3 picked from
  // (red, green) first, then blue from (that, blue).
  __m512i red_green[C], with_blue[C];
  __mmask16 keep[C];
  for (int k = 0; k < C; ++k) {
    alignas(64) int32_t first[16], second[16];
    for (int j = 0; j < 16; ++j) {
      const int e = 16 * k + j, pixel = e / 3, channel = e % 3;
      first[j] = channel == 0 ? pixel : channel == 1 ? 16 + pixel : 0;
      second[j] = channel == 2 ? 16 + pixel : j;
    }
    red_green[k] = _mm512_load_si512(first);
    with_blue[k] = _mm512_load_si512(second);
    const int64_t left = std::min<int64_t>(16, std::max<int64_t>(0, 3 * P - 16 * k));  // P 14: 16, 16, 10
    keep[k] = static_cast<__mmask16>((1u << left) - 1);
  }
  const __m512 w0 = _mm512_set1_ps(weight[0]), w1 = _mm512_set1_ps(weight[1]), w2 = _mm512_set1_ps(weight[2]);
  const __m512 b0 = _mm512_set1_ps(bias[0]), b1 = _mm512_set1_ps(bias[1]), b2 = _mm512_set1_ps(bias[2]);
  for (int64_t gx = 0; gx < gw; ++gx) {
    for (int64_t my = 0; my < m; ++my) {
      for (int64_t mx = 0; mx < m; ++mx) {
        const uint8_t* from = band + my * P * width + gx * factor + mx * P;
        for (int64_t t = 0; t < T; ++t) {
          out_t* to = out + t * block;
          if (t > 0 && frame_stride == 0) {
            std::memcpy(to, out, static_cast<size_t>(block) * sizeof(out_t));
            continue;
          }
          for (int64_t py = 0; py < P; ++py) {
            const uint8_t* run = from + t * frame_stride + py * width;
            const __m512 r = affine_run16_avx512(run, w0, b0), g = affine_run16_avx512(run + plane, w1, b1);
            const __m512 b = affine_run16_avx512(run + 2 * plane, w2, b2);
            out_t* pixels = to + py * P * C;
            for (int k = 0; k < C; ++k) {
              const __m512 f = _mm512_permutex2var_ps(_mm512_permutex2var_ps(r, red_green[k], g), with_blue[k], b);
              if constexpr (std::is_same_v<out_t, float>) {
                _mm512_mask_storeu_ps(pixels + 16 * k, keep[k], f);
              } else {
                _mm256_mask_storeu_epi16(pixels + 16 * k, keep[k], bfloat16_bits_avx512(f));
              }
            }
          }
        }
        out += T * block;
      }
    }
  }
}

template <typename out_t>
__attribute__((target("avx2,fma"))) void cut_patch_rows_from_band_avx2(const uint8_t* band, int64_t width, int64_t C,
                                                                       int64_t P, int64_t m, int64_t T,
                                                                       int64_t frame_stride, const float* weight,
                                                                       const float* bias, out_t* out) {
  const int64_t factor = P * m, gw = width / factor, plane = factor * width, block = P * P;
  const __m256i half = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), nan = _mm256_set1_epi32(0x7FC0);
  for (int64_t gx = 0; gx < gw; ++gx) {
    for (int64_t my = 0; my < m; ++my) {
      for (int64_t mx = 0; mx < m; ++mx) {
        const uint8_t* from = band + my * P * width + gx * factor + mx * P;
        for (int64_t c = 0; c < C; ++c) {
          const __m256 wv = _mm256_set1_ps(weight[c]), bv = _mm256_set1_ps(bias[c]);
          for (int64_t t = 0; t < T; ++t) {
            out_t* to = out + t * block;
            if (t > 0 && frame_stride == 0) {
              std::memcpy(to, out, static_cast<size_t>(block) * sizeof(out_t));
              continue;
            }
            const uint8_t* run_from = from + c * plane + t * frame_stride;
            for (int64_t py = 0; py < P; ++py) {
              const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(run_from + py * width));
              __m256 f[2];
              for (int k = 0; k < 2; ++k) {
                const __m256i x = _mm256_cvtepu8_epi32(k == 0 ? v : _mm_srli_si128(v, 8));
                f[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), wv, bv);
              }
              if constexpr (std::is_same_v<out_t, float>) {
                float* row = to + py * P;
                _mm256_storeu_ps(row, f[0]);
                if (py + 1 < P) {  // the 16 - P values past the run are the next run's, written next
                  _mm256_storeu_ps(row + 8, f[1]);
                } else {
                  alignas(32) float tmp[8];
                  _mm256_store_ps(tmp, f[1]);
                  std::memcpy(row + 8, tmp, static_cast<size_t>(P - 8) * sizeof(float));
                }
              } else {
                __m256i r[2];
                for (int k = 0; k < 2; ++k) {
                  const __m256i u = _mm256_castps_si256(f[k]);
                  const __m256i rounded = _mm256_srli_epi32(
                      _mm256_add_epi32(_mm256_add_epi32(u, half), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
                  r[k] = _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(_mm256_cmp_ps(f[k], f[k], _CMP_UNORD_Q)));
                }
                const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xD8);
                uint16_t* row = to + py * P;
                if (py + 1 < P) {  // the 16 - P values past the run are the next run's, written next
                  _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), h);
                } else {
                  alignas(32) uint16_t tmp[16];
                  _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), h);
                  std::memcpy(row, tmp, static_cast<size_t>(P) * 2);
                }
              }
            }
          }
          out += T * block;
        }
      }
    }
  }
}
#endif

}  // namespace
}  // namespace fused_input_norm
