// The resize op on the CPU for one capability, run_resize_cpu_with<capability>: each capability's instance is
// compiled in a translation unit of its own (resample_cpu_default.cpp, _avx2, _avx512, _neon), so a build
// compiles them side by side; resample_cpu.cpp picks one per call. In one unit they were the longest step of
// every build (157 s on this 2-core machine, while the other core had finished the rest).
//
// Work is split into bands of output rows (one row of merged patches, or kBandRows image rows), one band per
// parallel task: the band is resampled by the kernels of resample_cpu_kernels.h, and the affine's own strided
// walker (affine_cpu_kernels.h) normalizes it into the output layout.
#pragma once

#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "affine.h"
#include "dispatch.h"
#include "resample.h"
#include "resample_cpu_kernels.h"

namespace fused_input_norm {
namespace {

constexpr int64_t kBandRows = 32;  // planar output: rows per task
// Bytes of input read plus values written that make a task worth a thread (ATen's GRAIN_SIZE): a small
// image stays on the calling thread instead of waiting for a second one (12 ms for an 80x60 JPEG at two
// threads on a loaded 2-core machine, against 0.7 ms on one).
constexpr int64_t kGrainWork = 32768;
// A call whose whole work is below this (about 0.5 ms on one core here) runs on the calling thread: on a
// 2-core machine whose other core was busy, a second thread made such calls slower in the tail (a 200x300
// photo: 0.33 ms median, 1.4 ms max on one thread; 4.2 ms max on two), which the parallel speed-up
// (0.2 ms) never pays back.
constexpr int64_t kSerialWork = 1 << 19;

// The band of canvas rows [y0, y0 + rows) ([C][rows][width] bytes) normalized into the tiles it crosses: tile
// (r, c) of side P is the output's slot r * (width / P) + c, [C][P][P]. Each tile's channel gets the band's
// rows that fall in it, a contiguous run of its plane.
template <CpuCapability cap, typename in_t, typename out_t>
void write_tile_rows(const in_t* band, int64_t y0, int64_t rows, int64_t width, int64_t C, int64_t P,
                     const float* weight, const float* bias, out_t* image_out) {
  const int64_t columns = width / P;
  for (int64_t y = y0; y < y0 + rows;) {
    const int64_t tile_row = y / P, in_tile = y % P, n = std::min(y0 + rows, (tile_row + 1) * P) - y;
    const int64_t sizes[2] = {n, P}, strides[2] = {width, 1};
    StridedLayout run{};
    build_strided_layout(2, sizes, strides, -1, &run);
    for (int64_t column = 0; column < columns; ++column) {
      for (int64_t c = 0; c < C; ++c) {
        const in_t* from = band + (c * rows + y - y0) * width + column * P;
        out_t* to = image_out + ((tile_row * columns + column) * C + c) * P * P + in_tile * P;
        affine_strided_outlined<cap>(from, to, weight + c, bias + c, run, int64_t{0}, n * P);
      }
    }
    y += n;
  }
}

// The band of canvas rows [y0, y0 + rows) of frames [first_frame, first_frame + frames), resampled into the
// task's buffer, frame t at t * frame_elems: bytes, or float32 for the cv2 filters, linear_f32 and torch's float32
// antialiased filters. Its own function of the capability's code, made once per capability: inlined into the
// writers, it was compiled again for each output dtype.
template <CpuCapability capability>
void resample_frames_band(const ResizePlan& p, const PairPlans* pairs, uint64_t call, const void* input,
                          int64_t first_frame, int64_t frames, int64_t frame_elems, int64_t y0, int64_t rows,
                          uint8_t* bytes, float* floats) {
  if (is_cv2(p.filter)) {
    for (int64_t t = 0; t < frames; ++t) {
      cv2_canvas_band(p, static_cast<const uint8_t*>(input), first_frame + t, y0, rows, floats + t * frame_elems);
    }
    return;
  }
  on_capability<capability>([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
    for (int64_t t = 0; t < frames; ++t) {
      if (is_linear_f32(p.filter) || is_aa_f32(p.filter)) {
        torch_float_canvas_band<cap>(p, input, first_frame + t, y0, rows, floats + t * frame_elems);
      } else {
        canvas_band<cap>(p, pairs, call, static_cast<const uint8_t*>(input), first_frame + t, t, y0, rows,
                         bytes + t * frame_elems);
      }
    }
  });
}

}  // namespace

template <CpuCapability capability>
void run_resize_cpu_with(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const ResizePlan& p) {
  const auto* w = static_cast<const float*>(weight.const_data_ptr());
  const auto* b = static_cast<const float*>(bias.const_data_ptr());
  // Bands, rows and the layout are the canvas's (the crop's without padding): canvas_band makes each band.
  const int64_t C = p.channels, h = p.canvas_h, width = p.canvas_w;
  const bool patches = p.patch > 0;
  // float32 bands: the cv2 filters', linear_f32's and torch's float32 antialiased filters'
  const bool float_band = is_cv2(p.filter) || is_linear_f32(p.filter) || is_aa_f32(p.filter);
  // Tiles taller than a band (InternVL's 448, LLaVA-OneVision's 384, Llama 4's 336: patches (1, tile, 1)):
  // bands of kBandRows rows, each written straight into the tiles it crosses. A row of tiles as one band
  // (1.8 MB of bytes and 7 MB of float32 for 1344-wide 448 tiles) left L2 and made the tiles 1.2-1.7x the
  // planar resize of the same pixels.
  const bool channels_last = patches && p.patch_layout == PatchLayout::kChannelsLast;
  const bool strips = patches && p.patch_layout == PatchLayout::kStrips;
  const bool tiles = patches && p.patch_layout == PatchLayout::kChannelsFirst && p.merge == 1 && p.temporal == 1 &&
                     p.patch > kBandRows;
  const int64_t band_rows = patches && !tiles ? p.patch * p.merge : kBandRows;
  const int64_t bands = (h + band_rows - 1) / band_rows;
  // Clip mode: a task's band holds the band of each of the group's T frames, frame t at t * frame_elems.
  const int64_t frames = p.clip ? p.temporal : 1, frame_elems = C * band_rows * width;

  // Patches: a band is one row of merged patches, a contiguous run of the output laid out like the
  // patchify view of the band (image and grid row dropped).
  StridedLayout band_layout{};
  int64_t band_numel = 0;
  if (patches) {
    const int64_t P = p.patch, m = p.merge, T = p.temporal, factor = P * m, gw = width / factor;
    const int64_t plane = band_rows * width, frame = p.clip ? frame_elems : 0;
    if (channels_last) {
      const int64_t sizes[7] = {gw, m, m, T, P, P, C};
      const int64_t strides[7] = {factor, P * width, P, frame, width, 1, plane};
      build_strided_layout(7, sizes, strides, 6, &band_layout);
    } else {
      const int64_t sizes[7] = {gw, m, m, C, T, P, P};
      const int64_t strides[7] = {factor, P * width, P, plane, frame, width, 1};
      build_strided_layout(7, sizes, strides, 3, &band_layout);
    }
    band_numel = gw * m * m * C * T * P * P;
  }

  // A band's share of the work: its slice of the input (read by the first pass) and of the output.
  const int64_t band_work = std::max<int64_t>(1, frames * C * (p.in_h * p.in_w + h * width) / bands);
  const int64_t tasks = p.batch / frames * bands;
  const int64_t grain = band_work * tasks < kSerialWork ? tasks : std::max<int64_t>(1, kGrainWork / band_work);

  const uint64_t call = call_serial.fetch_add(1) + 1;
  // The pmaddwd kernels' coefficients (x86 avx2 / avx512), made once for the call's bands.
  PairPlans pair_plans;
  const PairPlans* pairs = nullptr;
  if (vertical_madd_for_cpu() != nullptr) {
    pair_plans.row = make_pair_plan(p.row_plan);
    pair_plans.col = make_pair_plan(p.col_plan);
    pairs = &pair_plans;
  }

  // The output is usually fresh (the one allocation of a processor or patchify call), and the op its first
  // writer.
  advise_huge_pages(out);
  FIN_DISPATCH_RESIZE_OUT(out.scalar_type(), [&] {
    auto* y = static_cast<out_t*>(out.mutable_data_ptr());
    torch::stable::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t image = task / bands, band = task % bands;  // image: the group of frames in clip mode
        const int64_t y0 = band * band_rows, y1 = std::min(h, y0 + band_rows), rows = y1 - y0;
        std::vector<uint8_t>& buffer = scratch.band;
        std::vector<float>& float_buffer = scratch.cv2_band;
        if (float_band) {
          float_buffer.resize(static_cast<size_t>(frames * C * rows * width));
        } else {
          buffer.resize(
              static_cast<size_t>(frames * C * rows * width + 16));  // + 16: cut_patch_rows_from_band_*'s loads
        }
        resample_frames_band<capability>(p, pairs, call, input.const_data_ptr(), image * frames, frames, frame_elems,
                                         y0, rows, buffer.data(), float_buffer.data());
        // The band, resampled, is the source of the affine's own strided walker (affine_cpu_kernels.h): bytes,
        // or float32 for the cv2 filters, linear_f32 and the float32 antialiased filters.
        const auto write = [&](const auto* src) {
          using band_t = std::remove_cv_t<std::remove_pointer_t<decltype(src)>>;
          // Whole bands are cut into patch rows by the writers (channel-first or channel-last): a still's T frames
          // are one resampled frame (the first block copied), a clip's frame t is its own band, frame_stride on. A
          // partial band (a crop height that is not a multiple of P m) takes the strided walker.
          const bool whole_rows = patches && !tiles && rows == band_rows;
          const int64_t frame_stride = p.clip ? frame_elems : 0;
          bool cut = false;
#if defined(FIN_X86)
          if constexpr ((std::is_same_v<out_t, bfloat16_bits> || std::is_same_v<out_t, float>) &&
                        std::is_same_v<band_t, uint8_t> &&
                        (capability == CpuCapability::kAvx512 || capability == CpuCapability::kAvx2)) {
            using bits_t = std::conditional_t<std::is_same_v<out_t, float>, float, uint16_t>;
            auto* to = reinterpret_cast<bits_t*>(y + (image * bands + band) * band_numel);
            if (whole_rows && !channels_last && !strips && (p.patch == 14 || p.patch == 16)) {
              if constexpr (capability == CpuCapability::kAvx512) {
                cut_patch_rows_from_band_avx512(src, width, C, p.patch, p.merge, p.temporal, frame_stride, w, b, to);
              } else {
                cut_patch_rows_from_band_avx2(src, width, C, p.patch, p.merge, p.temporal, frame_stride, w, b, to);
              }
              cut = true;
            }
            if constexpr (capability == CpuCapability::kAvx512) {
              if (whole_rows && channels_last && C == 3 && (p.patch == 14 || p.patch == 16)) {
                cut_rgb_patch_rows_channels_last_from_band_avx512(src, width, p.patch, p.merge, p.temporal,
                                                                  frame_stride, w, b, to);
                cut = true;
              }
            }
          }
#endif
          if (strips) {
            // The band is one row of patches (rows == P: the canvas is whole patches): its row y of channel c is
            // the run of strip row (c, y) at this row of patches' place, rows out_pitch values apart.
            StridedLayout row_run{};
            const int64_t one = 1;
            build_strided_layout(1, &width, &one, -1, &row_run);
            out_t* first = y + (image * bands + band) * width;  // this row of patches' place in row (0, 0)
            for (int64_t c = 0; c < C; ++c) {
              for (int64_t row = 0; row < rows; ++row) {
                affine_strided_outlined<capability>(src + (c * rows + row) * width,
                                                    first + (c * p.patch + row) * p.out_pitch, w + c, b + c, row_run,
                                                    int64_t{0}, width);
              }
            }
          } else if (tiles) {
            write_tile_rows<capability>(src, y0, rows, width, C, p.patch, w, b, y + image * C * h * width);
          } else if (cut) {
          } else if (whole_rows) {
            // Each frame's and channel's band rows converted once, contiguously (the affine's vector loop over
            // whole rows), then cut into patch rows: P-element runs copied.
            const int64_t n = rows * width, one = 1;
            StridedLayout row_run{};
            build_strided_layout(1, &n, &one, -1, &row_run);
            std::vector<unsigned char>& conv_bytes = scratch.converted;
            conv_bytes.resize(static_cast<size_t>(frames * C * n) * sizeof(out_t));
            auto* conv = reinterpret_cast<out_t*>(conv_bytes.data());
            for (int64_t t = 0; t < frames; ++t) {
              for (int64_t c = 0; c < C; ++c) {
                const int64_t at = t * frame_elems + c * n;
                affine_strided_outlined<capability>(src + at, conv + at, w + c, b + c, row_run, int64_t{0}, n);
              }
            }
            out_t* rows_out = y + (image * bands + band) * band_numel;
            if (channels_last) {
              cut_patch_rows_channels_last(conv, width, C, p.patch, p.merge, p.temporal, frame_stride, rows_out);
            } else {
              cut_patch_rows(conv, width, C, p.patch, p.merge, p.temporal, frame_stride, rows_out);
            }
          } else if (patches) {
            affine_strided_outlined<capability>(src, y + (image * bands + band) * band_numel, w, b, band_layout,
                                                int64_t{0}, band_numel);
          } else {
            StridedLayout row_run{};
            const int64_t n = rows * width, one = 1;
            build_strided_layout(1, &n, &one, -1, &row_run);
            for (int64_t c = 0; c < C; ++c) {
              affine_strided_outlined<capability>(src + c * n, y + ((image * C + c) * h + y0) * width, w + c, b + c,
                                                  row_run, int64_t{0}, n);
            }
          }
        };
        if (float_band) {
          write(static_cast<const float*>(float_buffer.data()));
        } else {
          write(static_cast<const uint8_t*>(buffer.data()));
        }
      }
      release_large_scratch();
    });
  });
}

}  // namespace fused_input_norm
