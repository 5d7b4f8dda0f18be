// The resize op on the CPU. Work is split into bands of output rows (one row of merged patches, or
// kBandRows image rows), one band per parallel task: the band's first-pass rows and its resampled uint8
// rows are made in per-thread buffers that stay in L2, and the affine's own strided walker (affine_cpu.cpp)
// normalizes the band into the output layout. The passes are integer sums (resample_kernel.h), so the
// order in which they are vectorized does not change a bit.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "affine.h"
#include "cpu_clones.h"
#include "resample.h"

namespace fused_input_norm {
namespace {

constexpr int64_t kBandRows = 32;  // planar output: rows per task

// out[x] for x in [0, count): output index plan_begin + x of one row, from `row` whose taps are `step`
// elements apart and whose element 0 is input index tap_offset.
FIN_CPU_CLONES void horizontal_row(const uint8_t* row, int64_t step, const int32_t* plan, int64_t plan_begin,
                                   int64_t tap_offset, int64_t count, uint8_t* out) {
  const ResampleAxis axis = resample_axis(plan);
  for (int64_t x = 0; x < count; ++x) {
    const int64_t o = plan_begin + x;
    const uint8_t* base = row + (axis.bounds[2 * o] - tap_offset) * step;
    out[x] = resample_taps(base, step, axis.coeffs + o * axis.taps, axis.bounds[2 * o + 1], axis.precision);
  }
}

// One output row (output index o) of a vertical pass: out[x] for x in [0, count), from rows of `src` that are
// row_stride apart (src row 0 is input index tap_offset), column x at x * col_step. Each tap is one sweep
// along the row, which vectorizes across x; `acc` holds count int32 sums.
template <int64_t STEP>
inline __attribute__((always_inline)) void vertical_row_impl(const uint8_t* src, int64_t row_stride, int64_t col_step,
                                                             const int32_t* plan, int64_t o, int64_t tap_offset,
                                                             int64_t count, int32_t* acc, uint8_t* out) {
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

FIN_CPU_CLONES void vertical_row(const uint8_t* src, int64_t row_stride, int64_t col_step, const int32_t* plan,
                                 int64_t o, int64_t tap_offset, int64_t count, int32_t* acc, uint8_t* out) {
  if (col_step == 1) return vertical_row_impl<1>(src, row_stride, 1, plan, o, tap_offset, count, acc, out);
  vertical_row_impl<0>(src, row_stride, col_step, plan, o, tap_offset, count, acc, out);
}

// Per-thread scratch, grown as needed and kept between calls.
struct Scratch {
  std::vector<uint8_t> first, band;
  std::vector<int32_t> acc;
};
thread_local Scratch scratch;

// The resampled uint8 rows [y0, y1) of the crop of image b, every channel, into band[C][y1 - y0][crop_w].
void resample_band(const ResizePlan& p, const uint8_t* input, int64_t b, int64_t y0, int64_t y1, uint8_t* band) {
  const int64_t C = p.channels, w = p.crop_w, rows = y1 - y0;
  const int64_t sb = p.strides[0], sc = p.strides[1], sh = p.strides[2], sw = p.strides[3];
  Scratch& s = scratch;
  const uint8_t* image = input + b * sb;
  if (p.two_passes() && !p.vertical_first) {
    // Horizontal first: the input rows this band's vertical taps read, resampled across.
    const auto first = resample_bounds(p.in_h, p.out_h, p.filter, p.top + y0);
    const auto last = resample_bounds(p.in_h, p.out_h, p.filter, p.top + y1 - 1);
    const int64_t r0 = first[0], r1 = last[0] + last[1];
    s.first.resize(static_cast<size_t>(C * (r1 - r0) * w));
    s.acc.resize(static_cast<size_t>(w));
    for (int64_t c = 0; c < C; ++c) {
      uint8_t* h = s.first.data() + c * (r1 - r0) * w;
      for (int64_t r = r0; r < r1; ++r) horizontal_row(image + c * sc + r * sh, sw, p.col_plan, p.left, 0, w, h + (r - r0) * w);
      for (int64_t y = 0; y < rows; ++y) {
        vertical_row(h, w, 1, p.row_plan, p.top + y0 + y, r0, w, s.acc.data(), band + (c * rows + y) * w);
      }
    }
  } else if (p.two_passes()) {
    // Vertical first: this band's rows, resampled down over the columns the horizontal taps read.
    const int64_t q0 = p.first_begin, q = p.first_end - p.first_begin;
    s.first.resize(static_cast<size_t>(rows * q));
    s.acc.resize(static_cast<size_t>(q));
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < rows; ++y) {
        vertical_row(image + c * sc + q0 * sw, sh, sw, p.row_plan, p.top + y0 + y, 0, q, s.acc.data(),
                     s.first.data() + y * q);
      }
      for (int64_t y = 0; y < rows; ++y) {
        horizontal_row(s.first.data() + y * q, 1, p.col_plan, p.left, q0, w, band + (c * rows + y) * w);
      }
    }
  } else if (p.row_plan) {  // vertical only
    s.acc.resize(static_cast<size_t>(w));
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < rows; ++y) {
        vertical_row(image + c * sc + p.left * sw, sh, sw, p.row_plan, p.top + y0 + y, 0, w, s.acc.data(),
                     band + (c * rows + y) * w);
      }
    }
  } else {  // horizontal only
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < rows; ++y) {
        horizontal_row(image + c * sc + (p.top + y0 + y) * sh, sw, p.col_plan, p.left, 0, w, band + (c * rows + y) * w);
      }
    }
  }
}

void run_resize_cpu(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const ResizePlan& p) {
  const auto* in = static_cast<const uint8_t*>(input.const_data_ptr());
  const auto* w = static_cast<const float*>(weight.const_data_ptr());
  const auto* b = static_cast<const float*>(bias.const_data_ptr());
  const int64_t C = p.channels, h = p.crop_h, width = p.crop_w;
  const bool patches = p.patch > 0;
  const int64_t band_rows = patches ? p.patch * p.merge : kBandRows;
  const int64_t bands = (h + band_rows - 1) / band_rows;

  // Patches: a band is one row of merged patches, a contiguous run of the output laid out like the
  // patchify view of the band (image and grid row dropped).
  StridedLayout band_layout{};
  int64_t band_numel = 0;
  if (patches) {
    const int64_t P = p.patch, m = p.merge, T = p.temporal, factor = P * m, gw = width / factor;
    const int64_t sizes[7] = {gw, m, m, C, T, P, P};
    const int64_t strides[7] = {factor, P * width, P, band_rows * width, 0, width, 1};
    build_strided_layout(7, sizes, strides, 3, &band_layout);
    band_numel = gw * m * m * C * T * P * P;
  }

  torch::stable::parallel_for(0, p.batch * bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / bands, band = task % bands;
      const int64_t y0 = band * band_rows, y1 = std::min(h, y0 + band_rows), rows = y1 - y0;
      std::vector<uint8_t>& buffer = scratch.band;
      buffer.resize(static_cast<size_t>(C * rows * width));
      resample_band(p, in, image, y0, y1, buffer.data());
      if (patches) {
        affine_cpu_uint8(buffer.data(), out, (image * bands + band) * band_numel, w, b, band_layout, band_numel);
      } else {
        StridedLayout row_run{};
        const int64_t n = rows * width, one = 1;
        build_strided_layout(1, &n, &one, -1, &row_run);
        for (int64_t c = 0; c < C; ++c) {
          affine_cpu_uint8(buffer.data() + c * n, out, ((image * C + c) * h + y0) * width, w + c, b + c, row_run, n);
        }
      }
    }
  });
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CPU, m) {
  m.impl("resize_affine_out", TORCH_BOX(&resize_affine_out_op<run_resize_cpu>));
}

}  // namespace fused_input_norm
