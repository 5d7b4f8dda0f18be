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

#include <cmath>
#include <vector>

#include "numerics.h"
#include "strided_layout.h"

namespace fused_input_norm {

enum class ResampleFilter : int32_t { kBilinear = 0, kBicubic = 1 };
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

}  // namespace resample_filters

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
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = (filter == ResampleFilter::kBilinear ? 1.0 : 2.0) * filterscale;
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
  const bool torch_ref = reference == ResampleReference::kTorchvision;
  double (*fn)(double) = filter == ResampleFilter::kBilinear ? resample_filters::triangle
                         : torch_ref                         ? resample_filters::torch_cubic
                                                             : resample_filters::pil_cubic;
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
// at input index tap_offset); along the other axis the coordinate plus `fixed_begin` is src's.
struct ResamplePass {
  const uint8_t* src;
  int64_t stride_b, stride_c, stride_row, stride_col;
  const int32_t* plan;
  bool vertical;
  int32_t plan_begin, fixed_begin, tap_offset;

  FIN_HOST_DEVICE uint8_t at(int64_t b, int64_t c, int64_t i, int64_t j) const {
    const ResampleAxis axis = resample_axis(plan);
    const int64_t o = (vertical ? i : j) + plan_begin;
    const int64_t fixed = (vertical ? j : i) + fixed_begin;
    const int64_t tap_stride = vertical ? stride_row : stride_col;
    const uint8_t* base = src + b * stride_b + c * stride_c + fixed * (vertical ? stride_col : stride_row) +
                          (static_cast<int64_t>(axis.bounds[2 * o]) - tap_offset) * tap_stride;
    return resample_taps(base, tap_stride, axis.coeffs + o * axis.taps, axis.bounds[2 * o + 1], axis.precision);
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

// A source for the affine's strided walker (affine_kernel.h) that reads the resampled image instead of a
// tensor: the walker's input offsets are element offsets into the contiguous [B, C, h, w] resampled image,
// and loading one runs the (last) resampling pass for it.
template <typename index_t>
struct ResampledSource {
  ResamplePass pass;
  IntDivider<index_t> width, height, channels;

  FIN_HOST_DEVICE float operator()(index_t offset) const {
    const index_t row = width.div(offset), x = offset - row * width.divisor;
    const index_t plane = height.div(row), y = row - plane * height.divisor;
    const index_t b = channels.div(plane), c = plane - b * channels.divisor;
    return static_cast<float>(pass.at(b, c, y, x));
  }
};

#if defined(FIN_GPU_COMPILER)
template <typename index_t>
__global__ void resample_pass_kernel(ResamplePass pass, uint8_t* out, index_t channels, index_t rows, index_t cols,
                                     index_t numel) {
  resample_pass_thread<index_t>(pass, out, channels, rows, cols, numel,
                                static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                                static_cast<index_t>(gridDim.x) * blockDim.x);
}
#endif

}  // namespace fused_input_norm
