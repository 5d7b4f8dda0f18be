// Resampling uint8 images exactly as Pillow's Image.resize and torch's uint8 antialiased interpolate do.
//
// Both references are separable and integer: per output index, the coefficients of an axis are computed
// once in double (on the host, in the reference's order, without FMA contraction) and turned into fixed
// point; each pass is then a sum of uint8 * int32 products, shifted and clamped back to uint8, and the
// result of the first pass is a uint8 image (the rounding the second pass reads). An integer sum does not
// depend on its order, so the CPU and GPU kernels here produce the reference's bits whatever they vectorize.
//
// Torch-free, like the other kernel headers (see numerics.h): the host emulation runs the GPU code.
#pragma once

#include <array>
#include <cmath>
#include <vector>

#include "numerics.h"
#include "strided_layout.h"

namespace fused_input_norm {

// kCv2Cubic / kCv2CubicFloat: OpenCV's cv2.resize(..., INTER_CUBIC) of the uint8 image, and of the image
// converted to float32 (Mistral's ImageEncoder): see "OpenCV's INTER_CUBIC" below.
// kBilinearNoAntialias: torch's F.interpolate(mode="bilinear", antialias=False, align_corners=False) of a CPU
// uint8 tensor with up to 4 channels where torch runs its AVX2 kernel (x86): the antialiased kernel's windows
// and int16 coefficients, except that the triangle is never widened on downscale (2 taps per output index).
// Whatever the reference, like the cv2 filters.
// kBilinearFloat / kBilinearFloatChannelsLast: the same interpolate of the image converted to float32, as vLLM's
// MiMo processor and transformers' Molmo2 call it, by torch's generic kernel / its channels-last kernel (torch
// picks one per call): see "torch's float32 bilinear" below.
// kBilinearAntialiasFloat / kBicubicAntialiasFloat: torch's F.interpolate(mode="bilinear" / "bicubic",
// antialias=True) of the image converted to float32 (torchvision's resize of a float32 tensor: vLLM's MiniMax-M3
// video frames): see "torch's float32 antialiased filters" below.
enum class ResampleFilter : int32_t {
  kBilinear = 0,
  kBicubic = 1,
  kLanczos = 2,
  kCv2Cubic = 3,
  kCv2CubicFloat = 4,
  kBilinearNoAntialias = 5,
  kBilinearFloat = 6,
  kBilinearFloatChannelsLast = 7,
  kBilinearAntialiasFloat = 8,
  kBicubicAntialiasFloat = 9
};

FIN_HOST_DEVICE bool is_cv2(ResampleFilter filter) {
  return filter == ResampleFilter::kCv2Cubic || filter == ResampleFilter::kCv2CubicFloat;
}
FIN_HOST_DEVICE bool is_linear_f32(ResampleFilter filter) {
  return filter == ResampleFilter::kBilinearFloat || filter == ResampleFilter::kBilinearFloatChannelsLast;
}
FIN_HOST_DEVICE bool is_aa_f32(ResampleFilter filter) {
  return filter == ResampleFilter::kBilinearAntialiasFloat || filter == ResampleFilter::kBicubicAntialiasFloat;
}
// The filters that take a float32 input as well as uint8 (they compute in float32 from either).
FIN_HOST_DEVICE bool reads_float_input(ResampleFilter filter) { return is_linear_f32(filter) || is_aa_f32(filter); }
// kTorchvision: torch's uint8 kernel (int16 coefficients with a precision chosen per axis, as pillow-simd).
// kPil: Pillow's (int32 coefficients with 22 fraction bits).
enum class ResampleReference : int32_t { kPil = 0, kTorchvision = 1 };

// The coefficients of one axis, as one int32 array (a tensor for the glue, so it can live on the device):
// a header, then (first input index, tap count) per output index, then `taps` coefficients per output
// index (zero past its count).
struct PlanHeader {
  static constexpr int kOutSize = 0, kInSize = 1, kTaps = 2, kPrecision = 3, kSize = 4;
};

struct ResampleAxis {
  const int32_t* bounds;  // [out_size][2]: first input index, tap count
  const int32_t* coeffs;  // [out_size][taps]
  int32_t taps;
  int32_t precision;
};

FIN_HOST_DEVICE ResampleAxis resample_axis(const int32_t* plan) {
  const int32_t out_size = plan[PlanHeader::kOutSize];
  return {plan + PlanHeader::kSize, plan + PlanHeader::kSize + 2 * out_size, plan[PlanHeader::kTaps],
          plan[PlanHeader::kPrecision]};
}

// One resampled value: the taps of `src` (`step` elements apart) times the coefficients, rounded and clamped
// as both references do (start at one half, arithmetic shift, clamp to [0, 255]).
FIN_HOST_DEVICE uint8_t resample_taps(const uint8_t* src, int64_t step, const int32_t* coeffs, int32_t count,
                                      int32_t precision) {
  int32_t acc = precision > 0 ? int32_t{1} << (precision - 1) : 0;
  for (int32_t k = 0; k < count; ++k) acc += static_cast<int32_t>(src[k * step]) * coeffs[k];
  acc >>= precision;
  return static_cast<uint8_t>(acc < 0 ? 0 : acc > 255 ? 255 : acc);
}

// ---- the coefficient planner (host only) -------------------------------------------------------------
// The filters, each written as its reference writes it: the same double operations in the same order, so
// the same rounding. GCC contracts a * b + c into an FMA where the target has one, which would change the
// last bits: the planner is compiled without contraction (see FIN_NO_FP_CONTRACT).
#if defined(__clang__)
#define FIN_NO_FP_CONTRACT _Pragma("clang fp contract(off)")
#define FIN_NO_FP_CONTRACT_ATTR
#elif defined(__GNUC__)
#define FIN_NO_FP_CONTRACT
#define FIN_NO_FP_CONTRACT_ATTR __attribute__((optimize("fp-contract=off")))
#else
#define FIN_NO_FP_CONTRACT
#define FIN_NO_FP_CONTRACT_ATTR
#endif

namespace resample_filters {

FIN_NO_FP_CONTRACT_ATTR inline double triangle(double x) {  // both references
  FIN_NO_FP_CONTRACT
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

FIN_NO_FP_CONTRACT_ATTR inline double pil_cubic(double x) {  // Pillow's bicubic_filter, a = -0.5
  FIN_NO_FP_CONTRACT
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

FIN_NO_FP_CONTRACT_ATTR inline double torch_cubic(double x) {  // torch's cubic_convolution1/2 with A = -0.5
  FIN_NO_FP_CONTRACT
  constexpr double A = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2.0) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0.0;
}

// Lanczos-3: sinc(x) * sinc(x / 3) on a support of 3, sinc(x) = sin(pi x) / (pi x). Both references call
// libm's sin on the same doubles as these, so the same bits (glibc's sin does not depend on the CPU).
FIN_NO_FP_CONTRACT_ATTR inline double sinc(double x) {
  FIN_NO_FP_CONTRACT
  if (x == 0.0) return 1.0;
  constexpr double kPi = 3.14159265358979323846;  // M_PI, which strict C++ need not define
  x = x * kPi;
  return std::sin(x) / x;
}

FIN_NO_FP_CONTRACT_ATTR inline double pil_lanczos(double x) {  // Pillow's lanczos_filter: a half-open window
  FIN_NO_FP_CONTRACT
  if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
  return 0.0;
}

// torchvision 0.29's resize of a CPU uint8 tensor with LANCZOS (antialias=True; False is its ValueError) calls
// torch's interpolate(mode="lanczos") on the uint8 tensor itself, torch's integer kernel with this filter (no
// float round trip): tests/test_resize_lanczos.py holds it to torchvision's bytes.
FIN_NO_FP_CONTRACT_ATTR inline double torch_lanczos(double x) {  // torch's uint8 antialiased lanczos
  FIN_NO_FP_CONTRACT
  x = std::fabs(x);
  if (x < 3.0) return sinc(x) * sinc(x / 3);
  return 0.0;
}

}  // namespace resample_filters

// ---- OpenCV's INTER_CUBIC ------------------------------------------------------------------------------
// cv2.resize's generic cubic (resize.cpp's resizeGeneric_), the one every build runs where no HAL takes the
// call (on x86 the opencv-python wheels hand cubic to IPP first unless cv2.ipp.setUseIPP(False): IPP's own
// code, whose bits differ; see docs/api.md). Per output index: fx = float((o + 0.5) * in / out - 0.5), its
// floor sx and fraction t; the taps sx - 1 .. sx + 2, each clamped into the image (replicated border); the
// Keys coefficients with a = -0.75 computed in float32 at t, the last one 1 minus the other three; no
// widening on downscale. Horizontal pass first, then vertical, always both (an axis that keeps its size has
// the coefficients (0, 1, 0, 0)).
//   float32 (kCv2CubicFloat): the horizontal sum (((s0 a0 + s1 a1) + s2 a2) + s3 a3) in float32; the
//     vertical one in the same order, except for the elements OpenCV's SIMD loop computes, whose order is
//     s0 b0 + (s1 b1 + (s2 b2 + s3 b3)): the first floor(W * C / 4) * 4 of each row of W pixels of C
//     interleaved channels (4 float lanes: the SSE baseline the x86 wheels compile this loop for, and NEON).
//   uint8 (kCv2Cubic): coefficients rounded to int16 with 11 fraction bits (INTER_RESIZE_COEF_BITS); the
//     horizontal sums exact in int32; vertically, (sum of s_k b_k + 2^21) >> 22 clamped to [0, 255], except
//     in the SIMD loop (the first floor(W * C / 8) * 8 elements of a row), which converts to float32, sums
//     s0 b0' + (s1 b1' + (s2 b2' + s3 b3')) with b' = b / 2^22 and rounds to nearest even.
// A plan holds, per output index, (sx - 1, 4) and the 4 coefficients: float32 bit patterns (precision 0) or
// the int16 values (precision 11). Products are kept apart from the sums (cv2_product): an FMA contraction
// would round differently from OpenCV's SSE code.
namespace cv2_cubic {
constexpr int32_t kTaps = 4;
constexpr int32_t kCoefBits = 11;
constexpr int64_t kFloatLanes = 4, kFixedLanes = 8;
}  // namespace cv2_cubic

// a * b rounded once and never fused into a following add.
FIN_HOST_DEVICE float cv2_product(float a, float b) {
#if defined(FIN_DEVICE_PASS)
  return __fmul_rn(a, b);
#else
  float p = a * b;
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(p));  // opaque to the optimizer: no FMA can absorb the product
#elif defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  volatile float kept = p;
  p = kept;
#endif
  return p;
#endif
}

FIN_HOST_DEVICE int64_t cv2_clamp_index(int64_t i, int64_t size) { return i < 0 ? 0 : i < size ? i : size - 1; }

// The horizontal sum of one output index's 4 tap values s with its plan coefficients c: a float32 sum, or the
// exact int32 sum of the fixed-point taps (below 2^24 in magnitude, so exact as a float too).
FIN_HOST_DEVICE float cv2_horizontal_sum(const float s[4], const int32_t* c, bool fixed) {
  if (!fixed) {
    float v = cv2_product(s[0], bits_as_float(static_cast<uint32_t>(c[0])));
    for (int k = 1; k < 4; ++k) v = v + cv2_product(s[k], bits_as_float(static_cast<uint32_t>(c[k])));
    return v;
  }
  int32_t v = 0;
  for (int k = 0; k < 4; ++k) v += static_cast<int32_t>(s[k]) * c[k];
  return static_cast<float>(v);
}

// The vertical sum of one element's 4 first-pass values s; simd: whether OpenCV's SIMD loop computes the element
// (its place in the row below row_len / lanes * lanes: cv2_simd_lane).
FIN_HOST_DEVICE float cv2_vertical_sum(const float s[4], const int32_t* c, bool fixed, bool simd) {
  if (!fixed) {
    float b[4];
    for (int k = 0; k < 4; ++k) b[k] = bits_as_float(static_cast<uint32_t>(c[k]));
    if (simd) {
      return cv2_product(s[0], b[0]) + (cv2_product(s[1], b[1]) + (cv2_product(s[2], b[2]) + cv2_product(s[3], b[3])));
    }
    return ((cv2_product(s[0], b[0]) + cv2_product(s[1], b[1])) + cv2_product(s[2], b[2])) + cv2_product(s[3], b[3]);
  }
  int32_t r = 0;
  if (simd) {
    constexpr float kScale = 1.0f / static_cast<float>(1 << (2 * cv2_cubic::kCoefBits));
    float b[4];
    for (int k = 0; k < 4; ++k) b[k] = static_cast<float>(c[k]) * kScale;  // exact: a power of two
    const float v =
        cv2_product(s[0], b[0]) + (cv2_product(s[1], b[1]) + (cv2_product(s[2], b[2]) + cv2_product(s[3], b[3])));
#if defined(FIN_DEVICE_PASS)
    r = __float2int_rn(v);
#else
    r = static_cast<int32_t>(std::nearbyint(v));  // the default rounding mode: to nearest even, as cvtps2dq
#endif
  } else {
    // int32 products and sums as OpenCV's (wrapping, through uint32, where they would overflow).
    uint32_t sum = uint32_t{1} << (2 * cv2_cubic::kCoefBits - 1);
    for (int k = 0; k < 4; ++k) sum += static_cast<uint32_t>(static_cast<int32_t>(s[k]) * c[k]);
    r = static_cast<int32_t>(sum) >> (2 * cv2_cubic::kCoefBits);
  }
  return static_cast<float>(r < 0 ? 0 : r > 255 ? 255 : r);
}

// Whether OpenCV's vertical pass computes element x of a row of row_len interleaved values in its SIMD loop.
FIN_HOST_DEVICE bool cv2_simd_lane(int64_t x, int64_t row_len, bool fixed) {
  const int64_t lanes = fixed ? cv2_cubic::kFixedLanes : cv2_cubic::kFloatLanes;
  return x < row_len / lanes * lanes;
}

// Output index o's value of the horizontal pass over `row` (extent elements, `step` apart).
FIN_HOST_DEVICE float cv2_horizontal_value(const int32_t* plan, int64_t o, const uint8_t* row, int64_t step,
                                           int64_t extent) {
  const int64_t out_size = plan[PlanHeader::kOutSize];
  o = o < out_size ? o : out_size - 1;
  const int64_t size = plan[PlanHeader::kInSize] < extent ? plan[PlanHeader::kInSize] : extent;
  const int64_t first = plan[PlanHeader::kSize + 2 * o];
  float s[4];
  for (int k = 0; k < 4; ++k) s[k] = static_cast<float>(row[cv2_clamp_index(first + k, size) * step]);
  return cv2_horizontal_sum(s, plan + PlanHeader::kSize + 2 * out_size + cv2_cubic::kTaps * o,
                            plan[PlanHeader::kPrecision] != 0);
}

// Output index o's value of the vertical pass over the first pass's rows (`column`: its element at row 0,
// rows `row_stride` apart, row 0 being input index row_offset, `rows` of them); x: the element's place in its
// row of row_len interleaved values (which of OpenCV's loops computes it).
FIN_HOST_DEVICE float cv2_vertical_value(const int32_t* plan, int64_t o, const float* column, int64_t row_stride,
                                         int64_t row_offset, int64_t rows, int64_t x, int64_t row_len) {
  const int64_t out_size = plan[PlanHeader::kOutSize];
  o = o < out_size ? o : out_size - 1;
  const int64_t first = plan[PlanHeader::kSize + 2 * o];
  float s[4];
  for (int k = 0; k < 4; ++k) {
    const int64_t r = cv2_clamp_index(first + k, plan[PlanHeader::kInSize]) - row_offset;
    s[k] = column[cv2_clamp_index(r, rows) * row_stride];
  }
  const bool fixed = plan[PlanHeader::kPrecision] != 0;
  return cv2_vertical_sum(s, plan + PlanHeader::kSize + 2 * out_size + cv2_cubic::kTaps * o, fixed,
                          cv2_simd_lane(x, row_len, fixed));
}

// sx for output index o (the planner's and the host's bounds): float((o + 0.5) * scale - 0.5) floored, with
// scale = 1 / (out / in) in double as OpenCV computes it.
FIN_NO_FP_CONTRACT_ATTR inline float cv2_source_coordinate(int64_t in_size, int64_t out_size, int64_t o, int64_t* sx) {
  FIN_NO_FP_CONTRACT
  const double scale = 1.0 / (static_cast<double>(out_size) / static_cast<double>(in_size));
  const float fx = static_cast<float>((static_cast<double>(o) + 0.5) * scale - 0.5);
  const auto i = static_cast<int64_t>(fx);
  *sx = i - (static_cast<float>(i) > fx ? 1 : 0);  // cvFloor
  return fx - static_cast<float>(*sx);
}

// A zeroed plan of out_size indices of `taps` coefficients, its header written.
inline std::vector<int32_t> new_plan(int64_t in_size, int64_t out_size, int32_t taps, int32_t precision) {
  std::vector<int32_t> plan(PlanHeader::kSize + static_cast<size_t>(out_size * (2 + taps)), 0);
  plan[PlanHeader::kOutSize] = static_cast<int32_t>(out_size);
  plan[PlanHeader::kInSize] = static_cast<int32_t>(in_size);
  plan[PlanHeader::kTaps] = taps;
  plan[PlanHeader::kPrecision] = precision;
  return plan;
}

FIN_NO_FP_CONTRACT_ATTR inline std::vector<int32_t> make_cv2_plan(int64_t in_size, int64_t out_size, bool fixed) {
  FIN_NO_FP_CONTRACT
  using cv2_cubic::kTaps;
  std::vector<int32_t> plan = new_plan(in_size, out_size, kTaps, fixed ? cv2_cubic::kCoefBits : 0);
  int32_t* bounds = plan.data() + PlanHeader::kSize;
  int32_t* coeffs = bounds + 2 * out_size;
  for (int64_t o = 0; o < out_size; ++o) {
    int64_t sx = 0;
    const float x = cv2_source_coordinate(in_size, out_size, o, &sx);
    // OpenCV's interpolateCubic, in float32.
    constexpr float A = -0.75f;
    float c[4];
    c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
    c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = 1.f - c[0] - c[1] - c[2];
    bounds[2 * o] = static_cast<int32_t>(sx - 1);
    bounds[2 * o + 1] = kTaps;
    for (int k = 0; k < kTaps; ++k) {
      if (fixed) {  // saturate_cast<short>(c * 2048): rounded to nearest even
        const float v = std::nearbyint(c[k] * static_cast<float>(1 << cv2_cubic::kCoefBits));
        coeffs[kTaps * o + k] = static_cast<int32_t>(v < -32768.f ? -32768.f : v > 32767.f ? 32767.f : v);
      } else {
        coeffs[kTaps * o + k] = static_cast<int32_t>(float_as_bits(c[k]));
      }
    }
  }
  return plan;
}

// ---- torch's float32 bilinear ---------------------------------------------------------------------------
// F.interpolate(x.float(), size, mode="bilinear", align_corners=False, antialias=False) on the CPU, as torch's
// x86 builds compile it at CPU capability AVX2 and above, where the compiler fuses its float expressions into
// FMAs (its baseline build rounds each product: other bits). Per axis that changes size, output index o reads
//   src = max(fma(float(in) / float(out), o + 0.5f, -0.5f), 0), i0 = min(floor(src), in - 1),
//   i1 = i0 + 1 (i0 at the last input index: i0 again), l1 = clamp(src - i0, 0, 1), l0 = 1 - l1
// (an axis that keeps its size: i0 = i1 = o, l0 = 1, l1 = 0); x_rc below is the float32 pixel at (i_r of the
// row axis, i_c of the column axis). torch then runs one of two kernels, which sum differently:
//   generic (kBilinearFloat): t_r = fma(x_r0, lc0, x_r1 * lc1) for r = 0, 1, then fma(t0, lr0, t1 * lr1);
//   channels-last (kBilinearFloatChannelsLast), not separable: the four weights are the products of the two
//     axes' lambdas, rounded (w_rc = lr_r * lc_c), and the sum is fma(w11, x11, fma(w10, x10, fma(w00, x00,
//     w01 * x01))).
// torch takes the channels-last kernel when out_h + out_w <= 128, or with one thread (at::get_num_threads())
// and 3 channels, or for a channels-last input of more than 3 channels; the generic one otherwise
// (fused_input_norm.resize.torch_float_bilinear says which for a call). A plan holds, per output index,
// (i0, 2) and the float32 bit patterns of (l0, l1), precision 0: the same plan for both.
namespace linear_f32 {
constexpr int32_t kTaps = 2;
}  // namespace linear_f32

// Output index o's i0, and its l1 in *l1.
inline int64_t linear_f32_source(int64_t in_size, int64_t out_size, int64_t o, float* l1) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  // affine: the one rounding of torch's contracted scale * (o + 0.5) - 0.5, whatever this compiler fuses.
  float src = affine(scale, static_cast<float>(o) + 0.5f, -0.5f);
  src = src < 0.f ? 0.f : src;
  int64_t i0 = static_cast<int64_t>(std::floor(src));
  i0 = i0 < in_size - 1 ? i0 : in_size - 1;
  const float lambda = src - static_cast<float>(i0);
  *l1 = lambda < 0.f ? 0.f : lambda > 1.f ? 1.f : lambda;
  return i0;
}

inline std::vector<int32_t> make_linear_f32_plan(int64_t in_size, int64_t out_size) {
  using linear_f32::kTaps;
  std::vector<int32_t> plan = new_plan(in_size, out_size, kTaps, 0);
  int32_t* bounds = plan.data() + PlanHeader::kSize;
  int32_t* coeffs = bounds + 2 * out_size;
  for (int64_t o = 0; o < out_size; ++o) {
    float l1 = 0.f;
    const int64_t i0 = linear_f32_source(in_size, out_size, o, &l1);
    bounds[2 * o] = static_cast<int32_t>(i0);
    bounds[2 * o + 1] = kTaps;
    coeffs[kTaps * o] = static_cast<int32_t>(float_as_bits(1.f - l1));
    coeffs[kTaps * o + 1] = static_cast<int32_t>(float_as_bits(l1));
  }
  return plan;
}

// Output index o's two input indices and lambdas along one axis of `size` input indices; plan nullptr: the
// axis keeps its size. Indices are clamped into the axis (a device plan's contents are not checked).
struct LinearTaps {
  int64_t i0, i1;
  float l0, l1;
};

FIN_HOST_DEVICE LinearTaps linear_f32_taps(const int32_t* plan, int64_t o, int64_t size) {
  if (plan == nullptr) return {o, o, 1.f, 0.f};
  const int64_t out_size = plan[PlanHeader::kOutSize];
  o = o < out_size ? o : out_size - 1;
  const int64_t i0 = cv2_clamp_index(plan[PlanHeader::kSize + 2 * o], size);
  const int32_t* c = plan + PlanHeader::kSize + 2 * out_size + linear_f32::kTaps * o;
  return {i0, i0 + 1 < size ? i0 + 1 : i0, bits_as_float(static_cast<uint32_t>(c[0])),
          bits_as_float(static_cast<uint32_t>(c[1]))};
}

// a * b + c with one rounding (numerics.h's affine: hardware or emulated, the same bits on every backend); the
// CPU kernels pass their capability's own (affine_on).
struct OneRounding {
  FIN_HOST_DEVICE float operator()(float a, float b, float c) const { return affine(a, b, c); }
};

// One output element from its four pixels (x_rc: row tap r, column tap c) and the two axes' taps, by torch's
// channels-last kernel's sum (products) or its generic kernel's.
template <typename Fma = OneRounding>
FIN_HOST_DEVICE float linear_f32_sum(float x00, float x01, float x10, float x11, const LinearTaps& row,
                                     const LinearTaps& col, bool products, Fma fma = {}) {
  if (!products) {
    const float t0 = fma(x00, col.l0, cv2_product(x01, col.l1)), t1 = fma(x10, col.l0, cv2_product(x11, col.l1));
    return fma(t0, row.l0, cv2_product(t1, row.l1));
  }
  const float w00 = cv2_product(row.l0, col.l0), w01 = cv2_product(row.l0, col.l1);
  const float w10 = cv2_product(row.l1, col.l0), w11 = cv2_product(row.l1, col.l1);
  return fma(w11, x11, fma(w10, x10, fma(w00, x00, cv2_product(w01, x01))));
}

// Element (y, x) of the resized image from `plane` (one image's channel, uint8 or float32, rows and columns
// `stride_row` and `stride_col` apart, in_h x in_w).
template <typename in_t>
FIN_HOST_DEVICE float linear_f32_value(const in_t* plane, int64_t stride_row, int64_t stride_col,
                                       const int32_t* row_plan, const int32_t* col_plan, int64_t y, int64_t x,
                                       int64_t in_h, int64_t in_w, bool products) {
  const LinearTaps row = linear_f32_taps(row_plan, y, in_h), col = linear_f32_taps(col_plan, x, in_w);
  const in_t* r0 = plane + row.i0 * stride_row;
  const in_t* r1 = plane + row.i1 * stride_row;
  return linear_f32_sum(static_cast<float>(r0[col.i0 * stride_col]), static_cast<float>(r0[col.i1 * stride_col]),
                        static_cast<float>(r1[col.i0 * stride_col]), static_cast<float>(r1[col.i1 * stride_col]), row,
                        col, products);
}

// ---- torch's float32 antialiased filters ----------------------------------------------------------------
// F.interpolate(x.float(), size, mode="bilinear" / "bicubic", antialias=True, align_corners=False) on the CPU, as
// torch's x86 builds compile it at capability AVX2 and above. Separable: a horizontal pass where the width changes,
// into a float32 image, then a vertical one where the height changes (an axis that keeps its size is not touched).
// Per axis, in float32 where torch computes in its scalar type (double where its expression is double):
//   scale = float(in) / float(out); support = float(h * scale) where scale >= 1, else h (h = 2 bicubic, 1
//   bilinear); invscale = float(1 / scale) where scale >= 1, else 1; taps = ceil(support) * 2 + 1;
//   output index o: center = float(scale * (o + 0.5)); first = max(int(center - support + 0.5), 0) and
//   count = min(int(center + support + 0.5), in) - first, clamped to [0, taps] (the sums +- support in float32,
//   + 0.5 in double); the weights w_j = filter(float((float(first + j) - center + 0.5) * invscale)) for j < count,
//   each divided by their float32 sum where it is not 0.
//   The filters in float32 as the compiler contracts them: bicubic (a = -0.5) fma(fma(1.5, x, -2.5) * x, x, 1)
//   for |x| < 1, fma(fma(fma(-0.5, x, 2.5), x, -4), x, 2) for |x| < 2, else 0; bilinear 1 - |x| for |x| < 1.
// A value is the sum of its taps s_j (along the pass's axis) times w_j as the compiler vectorizes torch's loop
// (an in-order reduction, each product rounded): s_0 w_0, then + s_j w_j for the taps in blocks of 8 and then one
// block of 4 while that many remain, and the last 0-3 taps fused, fma(s_j, w_j, sum). Measured: torch 2.14.1's
// own values at capabilities AVX2 and AVX-512; its baseline build rounds every product instead (other bits). A
// plan holds, per output index, (first, count) and `taps` float32 bit patterns (zero past count), precision 0.
namespace aa_f32 {
constexpr int64_t kBlock = 8, kTailBlock = 4;
}  // namespace aa_f32

struct AaF32Axis {
  float scale, support, invscale;
  int32_t taps;
};

FIN_NO_FP_CONTRACT_ATTR inline AaF32Axis aa_f32_axis(int64_t in_size, int64_t out_size, ResampleFilter filter) {
  FIN_NO_FP_CONTRACT
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  const double half = filter == ResampleFilter::kBicubicAntialiasFloat ? 2.0 : 1.0;  // torch's interp_size * 0.5
  const float support = scale >= 1.0f ? static_cast<float>(half * scale) : static_cast<float>(half);
  const float invscale = scale >= 1.0f ? static_cast<float>(1.0 / scale) : 1.0f;
  return {scale, support, invscale, static_cast<int32_t>(std::ceil(support)) * 2 + 1};
}

// Output index o's first tap and tap count, and its center in *center.
FIN_NO_FP_CONTRACT_ATTR inline std::array<int64_t, 2> aa_f32_window(const AaF32Axis& a, int64_t in_size, int64_t o,
                                                                    float* center) {
  FIN_NO_FP_CONTRACT
  *center = static_cast<float>(static_cast<double>(a.scale) * (static_cast<double>(o) + 0.5));
  int64_t first = static_cast<int64_t>(static_cast<double>(*center - a.support) + 0.5);
  first = first > 0 ? first : 0;
  int64_t last = static_cast<int64_t>(static_cast<double>(*center + a.support) + 0.5);
  last = last < in_size ? last : in_size;
  int64_t count = last - first;
  count = count < 0 ? 0 : count > a.taps ? a.taps : count;
  return {first, count};
}

// The filters as torch's x86 builds compute them (affine: one rounding, as the contracted expressions).
FIN_NO_FP_CONTRACT_ATTR inline float aa_f32_filter(float x, ResampleFilter filter) {
  FIN_NO_FP_CONTRACT
  x = std::fabs(x);
  if (filter == ResampleFilter::kBilinearAntialiasFloat) return x < 1.0f ? static_cast<float>(1.0 - x) : 0.0f;
  if (x < 1.0f) return affine(affine(1.5f, x, -2.5f) * x, x, 1.0f);
  if (x < 2.0f) return affine(affine(affine(-0.5f, x, 2.5f), x, -4.0f), x, 2.0f);
  return 0.0f;
}

FIN_NO_FP_CONTRACT_ATTR inline std::vector<int32_t> make_aa_f32_plan(int64_t in_size, int64_t out_size,
                                                                     ResampleFilter filter) {
  FIN_NO_FP_CONTRACT
  const AaF32Axis a = aa_f32_axis(in_size, out_size, filter);
  std::vector<int32_t> plan = new_plan(in_size, out_size, a.taps, 0);
  int32_t* bounds = plan.data() + PlanHeader::kSize;
  int32_t* coeffs = bounds + 2 * out_size;
  std::vector<float> w(static_cast<size_t>(a.taps));
  for (int64_t o = 0; o < out_size; ++o) {
    float center = 0.f;
    const auto [first, count] = aa_f32_window(a, in_size, o, &center);
    float total = 0.0f;
    for (int64_t j = 0; j < count; ++j) {
      const double offset = static_cast<double>(static_cast<float>(first + j) - center) + 0.5;
      w[j] = aa_f32_filter(static_cast<float>(offset * static_cast<double>(a.invscale)), filter);
      total += w[j];
    }
    for (int64_t j = 0; j < count; ++j) {
      if (total != 0.0f) w[j] /= total;
      coeffs[a.taps * o + j] = static_cast<int32_t>(float_as_bits(w[j]));
    }
    bounds[2 * o] = static_cast<int32_t>(first);
    bounds[2 * o + 1] = static_cast<int32_t>(count);
  }
  return plan;
}

// How many of `count` taps torch sums fused, the last ones: those after tap 0 left over from the blocks of rounded
// products (kBlock at a time, then one kTailBlock).
FIN_HOST_DEVICE int64_t aa_f32_fused_taps(int64_t count) {
  const int64_t rest = count > 1 ? (count - 1) % aa_f32::kBlock : 0;
  return rest >= aa_f32::kTailBlock ? rest - aa_f32::kTailBlock : rest;
}

FIN_HOST_DEVICE float plan_weight(const int32_t* coeffs, int64_t j) {
  return bits_as_float(static_cast<uint32_t>(coeffs[j]));
}

// One value: `count` taps of `src` (`step` elements apart, uint8 or float32) times the plan's coefficients, in
// torch's order (above). Fma: a * b + c rounded once (the CPU kernels pass their capability's).
template <typename in_t, typename Fma = OneRounding>
FIN_HOST_DEVICE float aa_f32_sum(const in_t* src, int64_t step, const int32_t* coeffs, int64_t count, Fma fma = {}) {
  if (count <= 0) return 0.0f;
  const int64_t rounded = count - aa_f32_fused_taps(count);
  float sum = cv2_product(static_cast<float>(src[0]), plan_weight(coeffs, 0));
  for (int64_t j = 1; j < rounded; ++j)
    sum = sum + cv2_product(static_cast<float>(src[j * step]), plan_weight(coeffs, j));
  for (int64_t j = rounded; j < count; ++j) sum = fma(static_cast<float>(src[j * step]), plan_weight(coeffs, j), sum);
  return sum;
}

// The filter's support at scale 1 (the references' support constants).
inline double filter_support(ResampleFilter filter) {
  if (filter == ResampleFilter::kBilinear || filter == ResampleFilter::kBilinearNoAntialias) return 1.0;
  return filter == ResampleFilter::kBicubic ? 2.0 : 3.0;
}

// The geometry of one axis resampled from in_size to out_size (both >= 1), and the window of input
// indices output index i reads: the references' bounds, computed as they compute them.
struct ResampleGeometry {
  double scale, support, inv_filterscale;
  int taps;  // the most taps any output index has, as the references size their tables
};

FIN_NO_FP_CONTRACT_ATTR inline ResampleGeometry resample_geometry(int64_t in_size, int64_t out_size,
                                                                  ResampleFilter filter) {
  FIN_NO_FP_CONTRACT
  // Pillow divides the box's width (a float) by the size; torch divides the sizes as doubles: the same
  // double for any size below 2^24.
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  if (is_cv2(filter)) return {scale, 2.0, 1.0, cv2_cubic::kTaps};  // 4 taps at any scale; support unused
  if (is_linear_f32(filter)) return {scale, 1.0, 1.0, linear_f32::kTaps};
  if (is_aa_f32(filter)) {
    const AaF32Axis a = aa_f32_axis(in_size, out_size, filter);
    return {scale, a.support, a.invscale, a.taps};
  }
  // Antialiasing widens the filter by the downscale factor; without it the filter keeps its own support.
  const double filterscale = scale < 1.0 || filter == ResampleFilter::kBilinearNoAntialias ? 1.0 : scale;
  const double support = filter_support(filter) * filterscale;
  return {scale, support, 1.0 / filterscale, static_cast<int>(std::ceil(support)) * 2 + 1};
}

struct TapWindow {
  int64_t first, count;
  double center;
};

FIN_NO_FP_CONTRACT_ATTR inline TapWindow tap_window(const ResampleGeometry& g, int64_t in_size, int64_t i) {
  FIN_NO_FP_CONTRACT
  const double center = (static_cast<double>(i) + 0.5) * g.scale;
  int64_t first = static_cast<int64_t>(center - g.support + 0.5);
  if (first < 0) first = 0;
  int64_t last = static_cast<int64_t>(center + g.support + 0.5);
  if (last > in_size) last = in_size;
  return {first, last - first, center};
}

// The plan of one axis: the windows, the weights in double (the filter at each tap, normalized by their
// sum), then fixed point.
FIN_NO_FP_CONTRACT_ATTR inline std::vector<int32_t> make_resample_plan(int64_t in_size, int64_t out_size,
                                                                       ResampleFilter filter,
                                                                       ResampleReference reference) {
  FIN_NO_FP_CONTRACT
  if (is_cv2(filter)) return make_cv2_plan(in_size, out_size, filter == ResampleFilter::kCv2Cubic);
  if (is_linear_f32(filter)) return make_linear_f32_plan(in_size, out_size);
  if (is_aa_f32(filter)) return make_aa_f32_plan(in_size, out_size, filter);
  const bool torch_ref = reference == ResampleReference::kTorchvision || filter == ResampleFilter::kBilinearNoAntialias;
  double (*fn)(double) = resample_filters::triangle;
  if (filter == ResampleFilter::kBicubic) fn = torch_ref ? resample_filters::torch_cubic : resample_filters::pil_cubic;
  if (filter == ResampleFilter::kLanczos) {
    fn = torch_ref ? resample_filters::torch_lanczos : resample_filters::pil_lanczos;
  }
  const ResampleGeometry g = resample_geometry(in_size, out_size, filter);
  const int taps = g.taps;
  std::vector<double> weights(static_cast<size_t>(out_size * taps), 0.0);
  std::vector<int32_t> plan(PlanHeader::kSize + static_cast<size_t>(out_size * (2 + taps)), 0);
  int32_t* bounds = plan.data() + PlanHeader::kSize;
  for (int64_t i = 0; i < out_size; ++i) {
    const TapWindow window = tap_window(g, in_size, i);
    double* w = weights.data() + i * taps;
    double total = 0.0;
    for (int64_t j = 0; j < window.count; ++j) {
      // Pillow: (x + xmin - center + 0.5) * inv_filterscale; torch subtracts a 0.0 align_corners delta
      // more, which changes no bit.
      w[j] = fn((static_cast<double>(j + window.first) - window.center + 0.5) * g.inv_filterscale);
      total += w[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < window.count; ++j) w[j] /= total;
    }
    bounds[2 * i] = static_cast<int32_t>(window.first);
    bounds[2 * i + 1] = static_cast<int32_t>(window.count);
  }

  int precision = 22;  // Pillow's PRECISION_BITS
  if (torch_ref) {
    // torch: the largest precision (< 22) at which the largest weight, rounded, still fits in 15 bits.
    double w_max = weights[0];
    for (const double v : weights) w_max = w_max < v ? v : w_max;
    for (precision = 0; precision < 22; ++precision) {
      const int next = static_cast<int>(0.5 + w_max * (1 << (precision + 1)));
      if (next >= (1 << 15)) break;
    }
  }
  int32_t* coeffs = bounds + 2 * out_size;
  const double one = static_cast<double>(1 << precision);
  for (size_t k = 0; k < weights.size(); ++k) {
    const double v = weights[k];
    const int fixed = v < 0 ? static_cast<int>(-0.5 + v * one) : static_cast<int>(0.5 + v * one);
    coeffs[k] = torch_ref ? static_cast<int16_t>(fixed) : fixed;  // torch stores int16
  }
  plan[PlanHeader::kOutSize] = static_cast<int32_t>(out_size);
  plan[PlanHeader::kInSize] = static_cast<int32_t>(in_size);
  plan[PlanHeader::kTaps] = taps;
  plan[PlanHeader::kPrecision] = precision;
  return plan;
}

// ---- one resampling pass, per element -----------------------------------------------------------------
// Element (b, c, i, j) of an image resampled along one axis from `src` (uint8, any strides). Along the
// resampled axis the element's coordinate plus `plan_begin` picks the plan's output index (a crop starts
// there), and the plan's input indices minus `tap_offset` are src's (src may be an intermediate that starts
// at input index tap_offset); along the other axis the coordinate plus `fixed_begin` is src's. Without a
// plan (neither axis changes size) the pass is the crop's copy, offset the same way.
struct ResamplePass {
  const uint8_t* src;
  int64_t stride_b, stride_c, stride_row, stride_col;
  const int32_t* plan;
  bool vertical;
  int32_t plan_begin, fixed_begin, tap_offset;
  int32_t tap_extent;  // src's elements along the resampled axis
  // The cv2 filters' last pass reads the first pass's float32 rows (fsrc; nullptr otherwise) and needs each
  // element's place in OpenCV's interleaved rows: (col_begin + j) * channels + c, of row_len values.
  const float* fsrc;
  int32_t channels, col_begin, row_len;
  // The float32 bilinear's one pass (linear_f32_products: torch's channels-last kernel's sum): src is the input,
  // `plan` the row plan and `col_plan` the column plan (either nullptr where the axis keeps its size), element
  // (i, j) at (i + plan_begin, j + fixed_begin) of the resized image, the input in_h x in_w.
  bool linear_f32, linear_f32_products;
  const int32_t* col_plan;
  int32_t in_h, in_w;
  const float* float_src;  // the float32 filters' input where it is float32 (src unused then); else nullptr
  // torch's float32 antialiased filters (is_aa_f32): each pass sums its taps as aa_f32_sum, from the input
  // (float_src or src) or, in the last of two passes, from the first pass's float32 rows (fsrc).
  bool aa_f32;

  // The resampled value of element (b, c, i, j) as the affine reads it.
  FIN_HOST_DEVICE float value(int64_t b, int64_t c, int64_t i, int64_t j) const {
    if (aa_f32) {
      return fsrc != nullptr        ? aa_f32_at(fsrc, b, c, i, j)
             : float_src != nullptr ? aa_f32_at(float_src, b, c, i, j)
                                    : aa_f32_at(src, b, c, i, j);
    }
    if (linear_f32 && float_src != nullptr) {
      return linear_f32_value(float_src + b * stride_b + c * stride_c, stride_row, stride_col, plan, col_plan,
                              i + plan_begin, j + fixed_begin, in_h, in_w, linear_f32_products);
    }
    if (linear_f32) {
      return linear_f32_value(src + b * stride_b + c * stride_c, stride_row, stride_col, plan, col_plan, i + plan_begin,
                              j + fixed_begin, in_h, in_w, linear_f32_products);
    }
    if (fsrc == nullptr) return static_cast<float>(at(b, c, i, j));
    const float* column = fsrc + b * stride_b + c * stride_c + j * stride_col;
    return cv2_vertical_value(plan, i + plan_begin, column, stride_row, tap_offset, tap_extent,
                              (col_begin + j) * channels + c, row_len);
  }

  FIN_HOST_DEVICE uint8_t at(int64_t b, int64_t c, int64_t i, int64_t j) const {
    if (plan == nullptr) return src[copied(b, c, i, j)];  // no axis changes size: the crop's element itself
    const Taps t = taps(b, c, i, j);
    return resample_taps(src + t.offset, t.step, t.coeffs, static_cast<int32_t>(t.count), plan[PlanHeader::kPrecision]);
  }

  // Element (b, c, i, j) by torch's float32 antialiased filters, from `from` (uint8 or float32, this pass's
  // strides).
  template <typename in_t>
  FIN_HOST_DEVICE_OUTLINED float aa_f32_at(const in_t* from, int64_t b, int64_t c, int64_t i, int64_t j) const {
    if (plan == nullptr) return static_cast<float>(from[copied(b, c, i, j)]);
    const Taps t = taps(b, c, i, j);
    return aa_f32_sum(from + t.offset, t.step, t.coeffs, t.count);
  }

  // Where neither axis changes size (both references copy): the offset of the crop's element (b, c, i, j).
  FIN_HOST_DEVICE int64_t copied(int64_t b, int64_t c, int64_t i, int64_t j) const {
    const int64_t row = (vertical ? i + plan_begin : i + fixed_begin),
                  col = (vertical ? j + fixed_begin : j + plan_begin);
    return b * stride_b + c * stride_c + row * stride_row + col * stride_col;
  }

  // The taps of element (b, c, i, j) along the resampled axis: the first one's offset, their step, their
  // coefficients and count.
  struct Taps {
    int64_t offset, step;
    const int32_t* coeffs;
    int64_t count;
  };
  FIN_HOST_DEVICE Taps taps(int64_t b, int64_t c, int64_t i, int64_t j) const {
    const ResampleAxis axis = resample_axis(plan);
    // The glue checks a plan's length, but its contents only on the CPU (reading a device plan back would
    // sync): the clamps keep a plan made for other sizes from reading outside the plan or src.
    int64_t o = (vertical ? i : j) + plan_begin;
    o = o < plan[PlanHeader::kOutSize] ? o : plan[PlanHeader::kOutSize] - 1;
    int64_t first = static_cast<int64_t>(axis.bounds[2 * o]) - tap_offset;
    first = first < 0 ? 0 : first < tap_extent ? first : tap_extent - 1;
    int64_t count = axis.bounds[2 * o + 1];
    count = count < axis.taps ? count : axis.taps;
    count = count < tap_extent - first ? count : tap_extent - first;
    const int64_t fixed = (vertical ? j : i) + fixed_begin;
    const int64_t step = vertical ? stride_row : stride_col;
    return {b * stride_b + c * stride_c + fixed * (vertical ? stride_col : stride_row) + first * step, step,
            axis.coeffs + o * axis.taps, count};
  }
};

// The first pass of a two-pass resize, one thread's share: the uint8 intermediate [B, C, rows, cols]
// (contiguous), elements first, first + step, ...
template <typename index_t>
FIN_HOST_DEVICE void resample_pass_thread(const ResamplePass& pass, uint8_t* out, index_t channels, index_t rows,
                                          index_t cols, index_t numel, index_t first, index_t step) {
  for (index_t n = first; n < numel; n += step) {
    const index_t j = n % cols, t = n / cols;
    const index_t i = t % rows, plane = t / rows;
    out[n] = pass.at(plane / channels, plane % channels, i, j);
  }
}

// The first (horizontal) pass of the filters with a float32 intermediate (the cv2 filters, torch's float32
// antialiased ones), one thread's share: the intermediate [B, C, rows, cols].
template <typename index_t>
FIN_HOST_DEVICE void float_first_pass_thread(const ResamplePass& pass, float* out, index_t channels, index_t rows,
                                             index_t cols, index_t numel, index_t first, index_t step) {
  for (index_t n = first; n < numel; n += step) {
    const index_t j = n % cols, t = n / cols;
    const index_t i = t % rows, plane = t / rows;
    if (pass.aa_f32) {
      out[n] = pass.value(plane / channels, plane % channels, i, j);
      continue;
    }
    const uint8_t* row = pass.src + (plane / channels) * pass.stride_b + (plane % channels) * pass.stride_c +
                         (i + pass.fixed_begin) * pass.stride_row;
    out[n] = cv2_horizontal_value(pass.plan, j + pass.plan_begin, row, pass.stride_col, pass.tap_extent);
  }
}

// A source for the affine's strided walker (affine_kernel.h) that reads the resampled image instead of a
// tensor: the walker's input offsets are element offsets into the contiguous [B, C, canvas_h, canvas_w]
// canvas, and loading one runs the (last) resampling pass for it, or, outside the crop's box in the canvas,
// is the fill byte (transformers pads the uint8 image before it normalizes: the fill goes through the same
// affine). Without padding the box is the whole canvas and the test is never true.
struct ResizePlan;

template <typename index_t>
struct ResampledSource {
  ResamplePass pass;
  IntDivider<index_t> width, height, channels;  // the canvas's
  index_t top, left, crop_h, crop_w;            // the crop's box in the canvas
  float fill;

  // For the plan's canvas, reading through `last` (last_pass); host only. A constructor, not an aggregate:
  // a brace list that names only some fields cannot leave the box zero (every element the fill).
  ResampledSource(const ResizePlan& p, const ResamplePass& last);

  FIN_HOST_DEVICE float operator()(index_t offset) const {
    const index_t row = width.div(offset), x = offset - row * width.divisor;
    const index_t plane = height.div(row), y = row - plane * height.divisor;
    const index_t b = channels.div(plane), c = plane - b * channels.divisor;
    // index_t is unsigned: a coordinate before the box wraps to a large value, so one compare per axis.
    const index_t iy = y - top, ix = x - left;
    if (iy >= crop_h || ix >= crop_w) return fill;
    return pass.value(b, c, iy, ix);
  }
};

// ---- the plan of a resize (host only) ------------------------------------------------------------------
// The op resamples a uint8 [B, C, H, W] image (any strides) exactly as Pillow or torch does, crops, pads
// (places the crop on a canvas of the fill byte), applies the affine and writes the output layout, in one
// call (h, w: the canvas's sides, the crop's without padding):
//   planar:  out [B, C, h, w]
//   patches: out [B * (h / P) * (w / P), C * T * P * P], Qwen-VL's patch rows of each image, the one
//            resampled frame repeated T times;
//   clip:    out [B / T * (h / P) * (w / P), C * T * P * P], the B images are frames of clips and each T
//            consecutive ones are the T frames of one temporal patch (frame t of a group in slot t);
//   channels last: the same rows, each laid out [T, P, P, C] (Gemma 4's and LFM2-VL's patches) instead of
//            [C, T, P, P]: the one change is the order the layout walks, so every backend writes it directly;
//   strips:  out [C, P, B * (h / P) * (w / P) * P] (T and m 1), MiniCPM-V's NaViT strips: row (c, y) holds
//            pixel row y of every patch's channel c, the patches in raster order, one after another. Its rows
//            may be pitched (out_pitch values apart, a window of a wider strips tensor: the views of one
//            MiniCPM-V call side by side); the layout walks them as if contiguous.
// An input already at the output size is copied (the crop of it), as both references do: the same op, so
// that the layout and the affine stay one pass.
// The layouts of patch rows (the op's fourth value of `patches`).
enum class PatchLayout : int64_t { kChannelsFirst = 0, kChannelsLast = 1, kStrips = 2 };

struct ResizePlan {
  int64_t batch, channels, in_h, in_w;
  int64_t out_h, out_w;               // the resampled image (before the crop)
  int64_t top, left, crop_h, crop_w;  // the crop, inside the resampled image
  // The canvas the output holds: the crop at (pad_top, pad_left), every other pixel the byte `fill`. A
  // canvas_h of 0 (a plan made without padding) means the canvas is the crop (finish_resize_plan).
  int64_t canvas_h, canvas_w, pad_top, pad_left, fill;
  std::array<int64_t, 4> strides;  // input's, in elements: b, c, h, w
  const int32_t* row_plan;         // vertical pass coefficients, nullptr when out_h == in_h
  const int32_t* col_plan;         // horizontal pass coefficients, nullptr when out_w == in_w
  bool vertical_first;             // both passes: which comes first
  ResampleFilter filter;
  int64_t temporal, patch, merge;  // patch == 0: planar output
  bool clip;                       // patches from groups of T frames (B divisible by T), not one frame T times
  PatchLayout patch_layout;        // with patch > 0: the rows' layout (the op's fourth value of patches)
  int64_t out_pitch;               // strips: values from one row of out to the next (>= its length)
  bool float_input;                // the input is float32 (the float32 bilinear only), not uint8
  StridedLayout layout;            // output order -> offsets into the virtual [B, C, crop_h, crop_w]
  int64_t numel;                   // of the output
  // The input rows (horizontal first) or columns (vertical first) the first pass must produce for the crop:
  // [first_begin, first_end). Unused with one pass.
  int64_t first_begin, first_end;

  // The float32 bilinear reads both axes in one pass (linear_f32_pass).
  bool two_passes() const { return row_plan != nullptr && col_plan != nullptr && !is_linear_f32(filter); }
};

// The first input index and count of the taps of output index i: the planner's own bounds, for the host
// to size the first pass without reading a plan that may live on the device.
inline std::array<int64_t, 2> resample_bounds(int64_t in_size, int64_t out_size, ResampleFilter filter, int64_t i) {
  if (is_cv2(filter)) {  // taps sx - 1 .. sx + 2, clamped into the image
    int64_t sx = 0;
    cv2_source_coordinate(in_size, out_size, i, &sx);
    const int64_t first = cv2_clamp_index(sx - 1, in_size), last = cv2_clamp_index(sx + 2, in_size);
    return {first, last - first + 1};
  }
  if (is_linear_f32(filter)) {  // i0 and i1 (i0 again at the last input index)
    float l1 = 0.f;
    const int64_t i0 = linear_f32_source(in_size, out_size, i, &l1);
    return {i0, i0 + 1 < in_size ? 2 : 1};
  }
  if (is_aa_f32(filter)) {
    float center = 0.f;
    return aa_f32_window(aa_f32_axis(in_size, out_size, filter), in_size, i, &center);
  }
  const TapWindow w = tap_window(resample_geometry(in_size, out_size, filter), in_size, i);
  return {w.first, w.count};
}

// Fills the derived fields (layout, numel, the first pass's span; the canvas when unset) of a plan whose
// sizes, crop, padding, strides, passes and patch geometry are set and valid; returns the output's shape.
inline std::vector<int64_t> finish_resize_plan(ResizePlan& p) {
  if (p.canvas_h == 0) {
    p.canvas_h = p.crop_h;
    p.canvas_w = p.crop_w;
    p.pad_top = p.pad_left = p.fill = 0;
  }
  // The layout indexes the virtual [B, C, canvas_h, canvas_w] image (ResampledSource's offsets).
  const int64_t B = p.batch, C = p.channels, h = p.canvas_h, w = p.canvas_w;
  std::vector<int64_t> out_shape;
  if (p.patch == 0) {
    out_shape = {B, C, h, w};
    const int64_t sizes[4] = {B, C, h, w}, strides[4] = {C * h * w, h * w, w, 1};
    build_strided_layout(4, sizes, strides, 1, &p.layout);
  } else {
    const int64_t P = p.patch, m = p.merge, T = p.temporal, factor = P * m, gh = h / factor, gw = w / factor;
    const int64_t groups = p.clip ? B / T : B;
    out_shape = {groups * gh * gw * m * m, C * T * P * P};
    // Qwen-VL's patch order (the patchify view): image (clip: group of T frames), grid row, grid col, merge
    // row, merge col, channel, frame (the one resampled frame T times: stride 0; clip: the group's frames,
    // consecutive images of the virtual [B, C, h, w]), patch row, patch col.
    const int64_t frame = p.clip ? C * h * w : 0, group = p.clip ? T * C * h * w : C * h * w;
    if (p.patch_layout == PatchLayout::kStrips) {
      // channel, patch row, image, grid row, then grid col and patch col (one run of the image's row)
      out_shape = {C, P, B * gh * gw * P};
      const int64_t sizes[5] = {C, P, B, gh, w}, strides[5] = {h * w, w, C * h * w, P * w, 1};
      build_strided_layout(5, sizes, strides, 0, &p.layout);
    } else if (p.patch_layout == PatchLayout::kChannelsLast) {
      // each row's channel innermost: frame, patch row, patch col, channel
      const int64_t sizes[9] = {groups, gh, gw, m, m, T, P, P, C};
      const int64_t strides[9] = {group, factor * w, factor, P * w, P, frame, w, 1, h * w};
      build_strided_layout(9, sizes, strides, 8, &p.layout);
    } else {
      const int64_t sizes[9] = {groups, gh, gw, m, m, C, T, P, P};
      const int64_t strides[9] = {group, factor * w, factor, P * w, P, h * w, frame, w, 1};
      build_strided_layout(9, sizes, strides, 5, &p.layout);
    }
  }
  p.numel = 1;
  for (const int64_t s : out_shape) p.numel *= s;
  if (p.two_passes()) {
    // The first pass produces only the input rows (columns) the second pass reads for the crop.
    const bool v = p.vertical_first;
    const int64_t in = v ? p.in_w : p.in_h, resampled = v ? p.out_w : p.out_h;
    const int64_t begin = v ? p.left : p.top, count = v ? p.crop_w : p.crop_h;
    const auto first = resample_bounds(in, resampled, p.filter, begin);
    const auto last = resample_bounds(in, resampled, p.filter, begin + count - 1);
    p.first_begin = first[0];
    p.first_end = last[0] + last[1];
  }
  return out_shape;
}

// The first pass's intermediate: rows and columns of each [rows, cols] plane.
inline std::array<int64_t, 2> intermediate_shape(const ResizePlan& p) {
  const int64_t span = p.first_end - p.first_begin;
  return p.vertical_first ? std::array<int64_t, 2>{p.crop_h, span} : std::array<int64_t, 2>{span, p.crop_w};
}

// A pass reading `src` with strides (b, c, h, w), every other field zero.
inline ResamplePass pass_reading(const uint8_t* src, const std::array<int64_t, 4>& strides) {
  ResamplePass pass{};
  pass.src = src;
  pass.stride_b = strides[0];
  pass.stride_c = strides[1];
  pass.stride_row = strides[2];
  pass.stride_col = strides[3];
  return pass;
}

// The first of two passes: element (b, c, i, j) of the intermediate, from the input (its first element: float32
// where p.float_input).
inline ResamplePass first_pass(const ResizePlan& p, const uint8_t* input) {
  ResamplePass pass = pass_reading(input, p.strides);
  pass.aa_f32 = is_aa_f32(p.filter);
  if (p.float_input) pass.float_src = reinterpret_cast<const float*>(input);
  pass.vertical = p.vertical_first;
  pass.plan = p.vertical_first ? p.row_plan : p.col_plan;
  pass.plan_begin = static_cast<int32_t>(p.vertical_first ? p.top : p.left);
  pass.fixed_begin = static_cast<int32_t>(p.first_begin);
  pass.tap_offset = 0;
  pass.tap_extent = static_cast<int32_t>(p.vertical_first ? p.in_h : p.in_w);
  return pass;
}

// The pass that produces element (b, c, i, j) of the crop: the last of two, reading the intermediate
// (`src`, contiguous [B, C, rows, cols]), or the only one, reading the input.
inline ResamplePass last_pass(const ResizePlan& p, const uint8_t* src, const std::array<int64_t, 4>& src_strides) {
  ResamplePass pass = pass_reading(src, src_strides);
  pass.aa_f32 = is_aa_f32(p.filter);
  // The only pass reads the input itself (float32 where p.float_input).
  if (p.float_input && !p.two_passes()) pass.float_src = reinterpret_cast<const float*>(src);
  pass.vertical = p.two_passes() ? !p.vertical_first : p.row_plan != nullptr;
  pass.plan = pass.vertical ? p.row_plan : p.col_plan;
  pass.plan_begin = static_cast<int32_t>(pass.vertical ? p.top : p.left);
  if (p.two_passes()) {  // the intermediate's other axis is the crop's already; its taps start at first_begin
    pass.fixed_begin = 0;
    pass.tap_offset = static_cast<int32_t>(p.first_begin);
    pass.tap_extent = static_cast<int32_t>(p.first_end - p.first_begin);
  } else {
    pass.fixed_begin = static_cast<int32_t>(pass.vertical ? p.left : p.top);
    pass.tap_offset = 0;
    pass.tap_extent = static_cast<int32_t>(pass.vertical ? p.in_h : p.in_w);
  }
  return pass;
}

// The last (vertical) pass of the filters with a float32 intermediate, over the first pass's rows (contiguous
// [B, C, rows, cols]).
inline ResamplePass float_rows_last_pass(const ResizePlan& p, const float* first_rows,
                                         const std::array<int64_t, 4>& strides) {
  ResamplePass pass = last_pass(p, nullptr, strides);
  pass.fsrc = first_rows;
  pass.channels = static_cast<int32_t>(p.channels);
  pass.col_begin = static_cast<int32_t>(p.left);
  pass.row_len = static_cast<int32_t>(p.out_w * p.channels);
  return pass;
}

// The float32 bilinear's one pass, over the input itself (`input`: its first element, uint8 or float32 as
// p.float_input says).
inline ResamplePass linear_f32_pass(const ResizePlan& p, const void* input) {
  ResamplePass pass = pass_reading(static_cast<const uint8_t*>(input), p.strides);
  if (p.float_input) pass.float_src = static_cast<const float*>(input);
  pass.linear_f32 = true;
  pass.linear_f32_products = p.filter == ResampleFilter::kBilinearFloatChannelsLast;
  pass.plan = p.row_plan;
  pass.col_plan = p.col_plan;
  pass.plan_begin = static_cast<int32_t>(p.top);
  pass.fixed_begin = static_cast<int32_t>(p.left);
  pass.in_h = static_cast<int32_t>(p.in_h);
  pass.in_w = static_cast<int32_t>(p.in_w);
  return pass;
}

template <typename index_t>
ResampledSource<index_t>::ResampledSource(const ResizePlan& p, const ResamplePass& last)
    : pass(last),
      width(make_divider(static_cast<index_t>(p.canvas_w))),
      height(make_divider(static_cast<index_t>(p.canvas_h))),
      channels(make_divider(static_cast<index_t>(p.channels))),
      top(static_cast<index_t>(p.pad_top)),
      left(static_cast<index_t>(p.pad_left)),
      crop_h(static_cast<index_t>(p.crop_h)),
      crop_w(static_cast<index_t>(p.crop_w)),
      fill(static_cast<float>(p.fill)) {}

#if defined(FIN_GPU_COMPILER)
template <typename index_t>
__global__ void float_first_pass_kernel(ResamplePass pass, float* out, index_t channels, index_t rows, index_t cols,
                                        index_t numel) {
  float_first_pass_thread<index_t>(pass, out, channels, rows, cols, numel,
                                   static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                   static_cast<index_t>(gridDim.x) * blockDim.x);
}

template <typename index_t>
__global__ void resample_pass_kernel(ResamplePass pass, uint8_t* out, index_t channels, index_t rows, index_t cols,
                                     index_t numel) {
  resample_pass_thread<index_t>(pass, out, channels, rows, cols, numel,
                                static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                static_cast<index_t>(gridDim.x) * blockDim.x);
}
#endif

}  // namespace fused_input_norm
