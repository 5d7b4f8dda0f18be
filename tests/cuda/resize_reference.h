// The GPU check's host reference for the resize (host only, no CUDA): Qwen2-VL's smart_resize, the pass
// order of each Pillow release, and a plain separable resize from the coefficient plans (make_resample_plan,
// the one planner both backends use), written for this check rather than taken from the kernels'
// per-element code; then the scalar affine and each layout's own index formula. emulate_resize runs the
// kernels' per-thread code on the host: reference_selftest.cpp checks the two agree (on the CPU, in CI), and
// the GPU check names which side a failing case differs from.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "affine_kernel.h"
#include "host_threads.h"
#include "resample_kernel.h"

namespace gpu_check {

namespace fin = fused_input_norm;

// transformers' Qwen2-VL smart_resize (python's round is half to even, as nearbyint).
inline std::pair<int64_t, int64_t> smart_resize(int64_t h, int64_t w, int64_t factor = 28, int64_t min_px = 56 * 56,
                                                int64_t max_px = 28 * 28 * 1280) {
  int64_t hb = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) / factor)) * factor;
  int64_t wb = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / factor)) * factor;
  if (hb * wb > max_px) {
    const double beta = std::sqrt(static_cast<double>(h * w) / max_px);
    hb = std::max(factor, static_cast<int64_t>(std::floor(h / beta / factor)) * factor);
    wb = std::max(factor, static_cast<int64_t>(std::floor(w / beta / factor)) * factor);
  } else if (hb * wb < min_px) {
    const double beta = std::sqrt(static_cast<double>(min_px) / (h * w));
    hb = static_cast<int64_t>(std::ceil(h * beta / factor)) * factor;
    wb = static_cast<int64_t>(std::ceil(w * beta / factor)) * factor;
  }
  return {hb, wb};
}

// fused_input_norm/resize.py vertical_first: the pass order of a Pillow release (torchvision: never).
inline bool vertical_first(const std::string& rule, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w) {
  if (rule == "13") return in_h - out_h > 0 && in_h - out_h > 2 * (in_w - out_w);
  if (rule == "12.2") return out_h < in_h && in_h > 100 * in_w;
  return false;
}

struct Image {  // uint8 [B, C, H, W] with strides (in elements)
  const uint8_t* data;
  int64_t B, C, H, W;
  std::array<int64_t, 4> s;
  uint8_t at(int64_t b, int64_t c, int64_t y, int64_t x) const {
    return data[b * s[0] + c * s[1] + y * s[2] + x * s[3]];
  }
};

// One pass along one axis over the whole image: contiguous [B, C, H', W'].
inline std::vector<uint8_t> host_pass(const Image& src, const std::vector<int32_t>& plan, bool vertical) {
  const int64_t out = plan[fin::PlanHeader::kOutSize], taps = plan[fin::PlanHeader::kTaps];
  const int32_t precision = plan[fin::PlanHeader::kPrecision];
  const int32_t* bounds = plan.data() + fin::PlanHeader::kSize;
  const int32_t* coeffs = bounds + 2 * out;
  const int64_t H = vertical ? out : src.H, W = vertical ? src.W : out;
  std::vector<uint8_t> dst(static_cast<size_t>(src.B * src.C * H * W));
  parallel_for(src.B * src.C * H, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t y = row % H, plane = row / H, c = plane % src.C, b = plane / src.C;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t o = vertical ? y : x, first = bounds[2 * o], count = bounds[2 * o + 1];
        int32_t acc = precision > 0 ? 1 << (precision - 1) : 0;
        for (int64_t k = 0; k < count; ++k) {
          const uint8_t v = vertical ? src.at(b, c, first + k, x) : src.at(b, c, y, first + k);
          acc += static_cast<int32_t>(v) * coeffs[o * taps + k];
        }
        acc >>= precision;
        dst[row * W + x] = static_cast<uint8_t>(acc < 0 ? 0 : acc > 255 ? 255 : acc);
      }
    }
  });
  return dst;
}

struct HostResize {
  std::vector<int32_t> rows, cols;             // the plans (empty: that axis keeps its size)
  std::vector<uint8_t> intermediate, resized;  // contiguous [B, C, ., .]: after the first pass, at the end
};

inline HostResize host_resize(const Image& in, int64_t out_h, int64_t out_w, fin::ResampleFilter filter,
                              fin::ResampleReference reference, bool vertical_first) {
  HostResize r;
  if (out_h != in.H) r.rows = fin::make_resample_plan(in.H, out_h, filter, reference);
  if (out_w != in.W) r.cols = fin::make_resample_plan(in.W, out_w, filter, reference);
  const auto contiguous = [&](const std::vector<uint8_t>& v, int64_t H, int64_t W) {
    return Image{v.data(), in.B, in.C, H, W, {in.C * H * W, H * W, W, 1}};
  };
  if (r.rows.empty() && r.cols.empty()) {  // no pass: the image itself, made contiguous
    r.resized.resize(static_cast<size_t>(in.B * in.C * in.H * in.W));
    for (int64_t plane = 0, n = 0; plane < in.B * in.C; ++plane)
      for (int64_t y = 0; y < in.H; ++y)
        for (int64_t x = 0; x < in.W; ++x) r.resized[n++] = in.at(plane / in.C, plane % in.C, y, x);
  } else if (r.rows.empty() || r.cols.empty()) {
    r.resized = host_pass(in, r.rows.empty() ? r.cols : r.rows, !r.rows.empty());  // one pass
  } else if (vertical_first) {
    r.intermediate = host_pass(in, r.rows, true);
    r.resized = host_pass(contiguous(r.intermediate, out_h, in.W), r.cols, false);
  } else {
    r.intermediate = host_pass(in, r.cols, false);
    r.resized = host_pass(contiguous(r.intermediate, in.H, out_w), r.rows, true);
  }
  return r;
}

// The plan the op builds for a resize of `in` (sizes, crop, layout; the plans' pointers from `host`).
struct ResizeJob {
  int64_t out_h, out_w, top, left, crop_h, crop_w;
  fin::ResampleFilter filter;
  fin::ResampleReference reference;
  bool vertical_first;
  bool patches;        // Qwen-VL rows (T 2, P `patch`, m 2); else planar [B, C, crop_h, crop_w]
  bool clip = false;   // with patches: the B images are frames, each 2 consecutive ones a temporal patch
  int64_t patch = 14;  // with patches: 14 (Qwen2-VL, Qwen2.5-VL) or 16 (Qwen3-VL)
  // The crop on a canvas: (canvas_h, canvas_w, top, left, fill); a canvas_h of 0: no padding.
  std::array<int64_t, 5> pad{};
  bool channels_last = false;  // with patches: each row [T, P, P, C] (Gemma 4's, LFM2-VL's), not [C, T, P, P]
};

inline fin::ResizePlan make_resize_plan(const Image& in, const ResizeJob& j, const int32_t* rows, const int32_t* cols) {
  fin::ResizePlan p{};
  p.batch = in.B, p.channels = in.C, p.in_h = in.H, p.in_w = in.W, p.out_h = j.out_h, p.out_w = j.out_w;
  p.top = j.top, p.left = j.left, p.crop_h = j.crop_h, p.crop_w = j.crop_w;
  p.strides = in.s;
  p.filter = j.filter;
  p.vertical_first = j.vertical_first;
  if (j.patches) {
    p.temporal = 2, p.patch = j.patch, p.merge = 2, p.clip = j.clip;
    p.patch_layout = j.channels_last ? fin::PatchLayout::kChannelsLast : fin::PatchLayout::kChannelsFirst;
  }
  p.row_plan = rows;
  p.col_plan = cols;
  p.canvas_h = j.pad[0], p.canvas_w = j.pad[1], p.pad_top = j.pad[2], p.pad_left = j.pad[3], p.fill = j.pad[4];
  fin::finish_resize_plan(p);
  return p;
}

// The output of the job from the resized image: the affine of each value of the canvas (the crop at (pad_top,
// pad_left), the fill around it), in the layout's own order.
template <typename out_t>
std::vector<out_t> expected_output(const fin::ResizePlan& p, const std::vector<uint8_t>& resized, const float* w,
                                   const float* bias) {
  const int64_t B = p.batch, C = p.channels, H = p.out_h, W = p.out_w, CH = p.canvas_h, CW = p.canvas_w;
  const auto R = [&](int64_t b, int64_t c, int64_t y, int64_t x) {
    const int64_t iy = y - p.pad_top, ix = x - p.pad_left;
    if (iy < 0 || iy >= p.crop_h || ix < 0 || ix >= p.crop_w) return static_cast<uint8_t>(p.fill);
    return resized[((b * C + c) * H + p.top + iy) * W + p.left + ix];
  };
  std::vector<out_t> e(static_cast<size_t>(p.numel));
  const auto value = [&](uint8_t v, int64_t c) {
    return fin::from_float<out_t>(fin::affine(fin::to_float(v), w[c], bias[c]));
  };
  if (p.patch == 0) {
    parallel_for(B * C * CH, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t y = r % CH, c = r / CH % C, b = r / (C * CH);
        for (int64_t x = 0; x < CW; ++x) e[r * CW + x] = value(R(b, c, y, x), c);
      }
    });
    return e;
  }
  const int64_t P = p.patch, m = p.merge, T = p.temporal, gh = CH / (P * m), gw = CW / (P * m);
  const int64_t row_len = C * T * P * P, groups = p.clip ? B / T : B;
  parallel_for(groups * gh * gw * m * m, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      // rows: image (clip: group of T frames), grid row, grid col, merge row, merge col; columns: channel,
      // frame, patch row, patch col (channels_last: frame, patch row, patch col, channel)
      const int64_t mw = row % m, mh = row / m % m, x0 = row / (m * m) % gw, y0 = row / (m * m * gw) % gh;
      const int64_t g = row / (m * m * gw * gh);
      for (int64_t col = 0; col < row_len; ++col) {
        const bool last = p.patch_layout == fin::PatchLayout::kChannelsLast;
        const int64_t inner = last ? col / C : col;  // col without the channel
        const int64_t px = inner % P, py = inner / P % P, t = inner / (P * P) % T;
        const int64_t c = last ? col % C : col / (P * P * T);
        const int64_t b = p.clip ? g * T + t : g;  // an image: every frame is the same one
        e[row * row_len + col] = value(R(b, c, (y0 * m + mh) * P + py, (x0 * m + mw) * P + px), c);
      }
    }
  });
  return e;
}

// The workspace the first pass must leave (the rows or columns of the intermediate the crop needs).
inline std::vector<uint8_t> expected_workspace(const fin::ResizePlan& p, const HostResize& host) {
  const auto [rows, cols] = fin::intermediate_shape(p);
  std::vector<uint8_t> want(static_cast<size_t>(p.batch * p.channels * rows * cols));
  const int64_t IH = p.vertical_first ? p.out_h : p.in_h, IW = p.vertical_first ? p.in_w : p.out_w;
  const int64_t r0 = p.vertical_first ? p.top : p.first_begin, c0 = p.vertical_first ? p.first_begin : p.left;
  for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
    const int64_t x = i % cols, y = i / cols % rows, plane = i / (cols * rows);
    want[i] = host.intermediate[(plane * IH + r0 + y) * IW + c0 + x];
  }
  return want;
}

// The kernels' own per-thread code run on the host (as tests/cpp/resize_emulation.cpp runs it), `threads`
// emulated threads; p's plan pointers must be host pointers. Returns the workspace through `workspace`.
template <typename out_t, typename index_t>
std::vector<out_t> emulate_resize(const fin::ResizePlan& p, const uint8_t* input, const float* w, const float* b,
                                  int64_t threads, std::vector<uint8_t>* workspace) {
  std::array<int64_t, 4> strides = p.strides;
  const uint8_t* src = input;
  workspace->clear();
  if (p.two_passes()) {
    const auto shape = fin::intermediate_shape(p);
    const auto n = static_cast<index_t>(p.batch * p.channels * shape[0] * shape[1]);
    workspace->assign(static_cast<size_t>(n), 0xAB);
    const fin::ResamplePass first = fin::first_pass(p, input);
    for (int64_t t = 0; t < threads; ++t) {
      fin::resample_pass_thread<index_t>(first, workspace->data(), static_cast<index_t>(p.channels),
                                         static_cast<index_t>(shape[0]), static_cast<index_t>(shape[1]), n,
                                         static_cast<index_t>(t), static_cast<index_t>(threads));
    }
    src = workspace->data();
    strides = {p.channels * shape[0] * shape[1], shape[0] * shape[1], shape[1], 1};
  }
  const fin::ResampledSource<index_t> source(p, fin::last_pass(p, src, strides));
  const auto calc = fin::make_offset_calculator<index_t>(p.layout);
  std::vector<out_t> out(static_cast<size_t>(p.numel));
  std::memset(out.data(), 0xFF, out.size() * sizeof(out_t));
  parallel_for(threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      fin::affine_strided_source_thread(source, out.data(), w, b, static_cast<index_t>(p.numel), calc,
                                        static_cast<index_t>(t), static_cast<index_t>(threads));
    }
  });
  return out;
}

template <typename T>
uint32_t value_bits(T v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}

// "" when equal, else how many differ and the first.
template <typename T>
std::string compare_values(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": sizes differ; ";
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (value_bits(got[i]) != value_bits(want[i]) && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad == 0) return "";
  char msg[200];
  std::snprintf(msg, sizeof msg, "%s: %lld of %zu differ, first at %lld (got 0x%x, want 0x%x); ", what,
                static_cast<long long>(bad), got.size(), static_cast<long long>(first), value_bits(got[first]),
                value_bits(want[first]));
  return msg;
}

}  // namespace gpu_check
