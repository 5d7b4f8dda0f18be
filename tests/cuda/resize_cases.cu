// The resize on the GPU: the first resampling pass (resample_pass_kernel) and the fused second pass +
// affine + layout (affine_strided_source_kernel with ResampledSource), launched as csrc/resample_cuda.cu
// launches them, on real photos (--photos DIR: NAME_HxW.rgb files, uint8 HWC, written by
// tests/cuda/peers.py photos) at several sizes, both references ("pil", "torchvision") and both filters.
// The reference is computed here on the host from the same coefficient plans (make_resample_plan), by a
// plain two-pass loop written for this check (not the kernels' per-element code), then the scalar affine and
// the layout's own index formula. The workspace (the uint8 intermediate) is compared too. With --dump DIR,
// each planar identity case's output is written as uint8 [3, h, w] for peers.py to compare with Pillow and
// torch themselves. Then the resize timings.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "affine_launch.h"
#include "check.h"
#include "resample_kernel.h"
#include "resize_reference.h"

namespace gpu_check {
namespace {

struct Photo {
  std::string name;
  int64_t h, w;
  std::vector<uint8_t> hwc;
};

std::vector<Photo> load_photos(const std::string& dir) {
  std::vector<Photo> photos;
  if (!dir.empty() && std::filesystem::is_directory(dir)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".rgb") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string stem = f.stem().string();  // NAME_HxW
      const size_t us = stem.rfind('_'), x = stem.rfind('x');
      if (us == std::string::npos || x == std::string::npos || x < us) continue;
      Photo p{stem.substr(0, us), std::stoll(stem.substr(us + 1, x - us - 1)), std::stoll(stem.substr(x + 1)), {}};
      p.hwc.resize(static_cast<size_t>(p.h * p.w * 3));
      std::ifstream in(f, std::ios::binary);
      if (!in.read(reinterpret_cast<char*>(p.hwc.data()), static_cast<std::streamsize>(p.hwc.size()))) continue;
      photos.push_back(std::move(p));
    }
  }
  if (photos.empty()) {  // no photos given: smooth synthetic ones (the JSON says so)
    for (const auto& [h, w] : std::vector<std::pair<int64_t, int64_t>>{{427, 640}, {1080, 1920}, {3024, 4032}}) {
      Photo p{"synthetic", h, w, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c) {
            const double v = 128 + 90 * std::sin(x * 0.013 * (c + 1) + y * 0.007) * std::cos(y * 0.011 - c) +
                             static_cast<double>(hash32(static_cast<uint64_t>((y * w + x) * 3 + c)) % 21) - 10;
            p.hwc[(y * w + x) * 3 + c] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, v)));
          }
      photos.push_back(std::move(p));
    }
  }
  return photos;
}

const float kClipW[3] = {1 / (255 * 0.26862954f), 1 / (255 * 0.26130258f), 1 / (255 * 0.27577711f)};
const float kClipB[3] = {-0.48145466f / 0.26862954f, -0.4578275f / 0.26130258f, -0.40821073f / 0.27577711f};
const float kOne[3] = {1, 1, 1}, kZero[3] = {0, 0, 0};

// ---- one resize on the GPU, launched as resample_cuda.cu launches it ---------------------------------
struct Job {
  std::string name;
  const Image* input;  // the host image (HWC or CHW strides) whose device copy the job reads
  ResizeJob r;
  bool identity;  // weight 1, bias 0 (f32 planar output: the dumps); else CLIP's constants
  Index index = Index::kAuto;
};

struct DevicePlan {
  fin::ResizePlan plan{};
  HostResize host;  // the plans (and, for correctness cases, the reference)
  DeviceBuffer drows, dcols, w, b, ws;
  int64_t ws_bytes = 0;
};

std::unique_ptr<DevicePlan> make_plan(const Job& j, bool reference) {
  const Image& in = *j.input;
  auto d = std::make_unique<DevicePlan>();
  if (reference) {
    d->host = host_resize(in, j.r.out_h, j.r.out_w, j.r.filter, j.r.reference, j.r.vertical_first);
  } else {
    if (j.r.out_h != in.H) d->host.rows = fin::make_resample_plan(in.H, j.r.out_h, j.r.filter, j.r.reference);
    if (j.r.out_w != in.W) d->host.cols = fin::make_resample_plan(in.W, j.r.out_w, j.r.filter, j.r.reference);
  }
  const auto upload = [](const std::vector<int32_t>& v, DeviceBuffer& buf) -> const int32_t* {
    if (v.empty()) return nullptr;
    buf = DeviceBuffer(v.size() * sizeof(int32_t));
    CHECK_CUDA(cudaMemcpy(buf.as(), v.data(), v.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    return buf.as<int32_t>();
  };
  d->plan = make_resize_plan(in, j.r, upload(d->host.rows, d->drows), upload(d->host.cols, d->dcols));
  if (d->plan.two_passes()) {
    const auto [r, c] = fin::intermediate_shape(d->plan);
    d->ws_bytes = d->plan.batch * d->plan.channels * r * c;
    d->ws = DeviceBuffer(d->ws_bytes);
  }
  d->w = DeviceBuffer(3 * sizeof(float));
  d->b = DeviceBuffer(3 * sizeof(float));
  CHECK_CUDA(cudaMemcpy(d->w.as(), j.identity ? kOne : kClipW, 3 * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d->b.as(), j.identity ? kZero : kClipB, 3 * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

// The first pass alone (nothing when there is one pass).
void launch_first(const DevicePlan& d, const uint8_t* in, int device) {
  const fin::ResizePlan& p = d.plan;
  if (!p.two_passes()) return;
  const auto [rows, cols] = fin::intermediate_shape(p);
  const int64_t n = p.batch * p.channels * rows * cols;
  const fin::ResamplePass first = fin::first_pass(p, in);
  if (n <= INT32_MAX) {
    fin::launch<fin::resample_pass_kernel<uint32_t>>(n, device, nullptr, first, d.ws.as<uint8_t>(),
                                                     static_cast<uint32_t>(p.channels), static_cast<uint32_t>(rows),
                                                     static_cast<uint32_t>(cols), static_cast<uint32_t>(n));
  } else {
    fin::launch<fin::resample_pass_kernel<uint64_t>>(n, device, nullptr, first, d.ws.as<uint8_t>(),
                                                     static_cast<uint64_t>(p.channels), static_cast<uint64_t>(rows),
                                                     static_cast<uint64_t>(cols), static_cast<uint64_t>(n));
  }
}

// The last pass fused with the affine and the layout; returns what ran.
template <typename out_t>
std::string launch_last(const DevicePlan& d, const uint8_t* in, out_t* out, Index index, int device) {
  const fin::ResizePlan& p = d.plan;
  const uint8_t* src = in;
  std::array<int64_t, 4> strides = p.strides;
  if (p.two_passes()) {
    const auto [rows, cols] = fin::intermediate_shape(p);
    src = d.ws.as<uint8_t>();
    strides = {p.channels * rows * cols, rows * cols, cols, 1};
  }
  const fin::ResamplePass last = fin::last_pass(p, src, strides);
  const int64_t resampled = p.batch * p.channels * p.canvas_h * p.canvas_w;
  const bool wide = index == Index::k64 || p.numel > INT32_MAX || resampled > INT32_MAX;
  const auto go = [&](auto tag) {
    using index_t = decltype(tag);
    const fin::ResampledSource<index_t> source(p, last);
    fin::launch<fin::affine_strided_source_kernel<fin::ResampledSource<index_t>, out_t, index_t>>(
        p.numel / fin::kStridedRun + 1, device, nullptr, source, out, d.w.as<float>(), d.b.as<float>(),
        static_cast<index_t>(p.numel), fin::make_offset_calculator<index_t>(p.layout));
  };
  if (wide) {
    go(uint64_t{});
  } else {
    go(uint32_t{});
  }
  return std::string(p.two_passes() ? (p.vertical_first ? "2 passes, vertical first" : "2 passes, horizontal first")
                                    : "1 pass") +
         (wide ? ", u64" : ", u32");
}

// Runs a job on the GPU; compares the output and the workspace with the host reference. On a difference,
// also runs the kernels' per-thread code on the host and says whether the GPU agrees with that.
template <typename out_t>
Outcome run_job(Context& ctx, const Job& j, const uint8_t* din) {
  const auto d = make_plan(j, true);
  const fin::ResizePlan& p = d->plan;
  DeviceBuffer dout(p.numel * sizeof(out_t));
  CHECK_CUDA(cudaMemset(dout.as(), 0xFF, p.numel * sizeof(out_t)));
  if (d->ws_bytes) CHECK_CUDA(cudaMemset(d->ws.as(), 0xAB, d->ws_bytes));
  launch_first(*d, din, ctx.device);
  const std::string ran = launch_last<out_t>(*d, din, dout.as<out_t>(), j.index, ctx.device);
  std::vector<out_t> got(static_cast<size_t>(p.numel));
  CHECK_CUDA(cudaMemcpy(got.data(), dout.as(), got.size() * sizeof(out_t), cudaMemcpyDeviceToHost));
  const float* w = j.identity ? kOne : kClipW;
  const float* b = j.identity ? kZero : kClipB;
  std::string diff = compare_values(got, expected_output<out_t>(p, d->host.resized, w, b), "output");
  std::vector<uint8_t> ws(static_cast<size_t>(d->ws_bytes));
  if (p.two_passes()) {
    CHECK_CUDA(cudaMemcpy(ws.data(), d->ws.as(), ws.size(), cudaMemcpyDeviceToHost));
    diff += compare_values(ws, expected_workspace(p, d->host), "first pass (workspace)");
  }
  if (!diff.empty()) {  // which side is wrong: the GPU against the kernels' own code run on the host
    const fin::ResizePlan hp = make_resize_plan(*j.input, j.r, d->host.rows.empty() ? nullptr : d->host.rows.data(),
                                                d->host.cols.empty() ? nullptr : d->host.cols.data());
    std::vector<uint8_t> emulated_ws;
    const auto emulated = emulate_resize<out_t, uint64_t>(hp, j.input->data, w, b, 4096, &emulated_ws);
    const std::string vs = compare_values(got, emulated, "GPU vs host emulation") +
                           (p.two_passes() ? compare_values(ws, emulated_ws, "GPU vs emulated workspace") : "");
    diff += vs.empty() ? "the GPU equals the host emulation of the kernels (the reference differs)" : vs;
  }
  if (!ctx.dump_dir.empty() && j.identity && diff.empty() && p.batch == 1 && p.patch == 0) {  // planar only
    std::vector<uint8_t> u8(got.size());
    for (size_t i = 0; i < got.size(); ++i) u8[i] = static_cast<uint8_t>(fin::to_float(got[i]));
    std::ofstream(ctx.dump_dir + "/" + j.name + ".u8", std::ios::binary)
        .write(reinterpret_cast<const char*>(u8.data()), static_cast<std::streamsize>(u8.size()));
  }
  const std::string what = ran + ", " + std::to_string(p.numel) + " values";
  return {diff.empty(), diff.empty() ? what : what + ": " + diff};
}

const char* ref_name(fin::ResampleReference r) { return r == fin::ResampleReference::kPil ? "pil" : "torchvision"; }
const char* filter_name(fin::ResampleFilter f) {
  return f == fin::ResampleFilter::kBilinear ? "bilinear" : f == fin::ResampleFilter::kBicubic ? "bicubic" : "lanczos";
}

struct Inputs {
  Image hwc, chw;
  std::vector<uint8_t> hwc_data, chw_data;
  DeviceBuffer dhwc, dchw;
};

std::unique_ptr<Inputs> upload(const std::vector<const Photo*>& batch) {
  auto in = std::make_unique<Inputs>();
  const int64_t B = static_cast<int64_t>(batch.size()), H = batch[0]->h, W = batch[0]->w, n = H * W * 3;
  in->hwc_data.resize(static_cast<size_t>(B * n));
  in->chw_data.resize(in->hwc_data.size());
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(in->hwc_data.data() + b * n, batch[b]->hwc.data(), n);
    for (int64_t i = 0; i < H * W; ++i)
      for (int c = 0; c < 3; ++c) in->chw_data[b * n + c * H * W + i] = batch[b]->hwc[i * 3 + c];
  }
  in->dhwc = DeviceBuffer(B * n);
  in->dchw = DeviceBuffer(B * n);
  CHECK_CUDA(cudaMemcpy(in->dhwc.as(), in->hwc_data.data(), B * n, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(in->dchw.as(), in->chw_data.data(), B * n, cudaMemcpyHostToDevice));
  in->hwc = Image{in->hwc_data.data(), B, 3, H, W, {n, 1, W * 3, 3}};
  in->chw = Image{in->chw_data.data(), B, 3, H, W, {n, H * W, W, 1}};
  return in;
}

std::string size_name(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

void check_job(Context& ctx, const Job& j, const Inputs& in, bool bf16) {
  const uint8_t* din = j.input == &in.hwc ? in.dhwc.as<uint8_t>() : in.dchw.as<uint8_t>();
  ctx.run("resize", j.name,
          [&]() { return bf16 ? run_job<fin::bfloat16_bits>(ctx, j, din) : run_job<float>(ctx, j, din); });
}

ResizeJob whole(int64_t h, int64_t w, fin::ResampleFilter f, fin::ResampleReference r, bool vf, bool patches) {
  return {h, w, 0, 0, h, w, f, r, vf, patches};
}

}  // namespace

void resize_cases(Context& ctx) {
  const std::vector<Photo> photos = load_photos(ctx.photos_dir);
  std::printf("resize: %zu photos from %s\n", photos.size(),
              ctx.photos_dir.empty() ? "nowhere (synthetic)" : ctx.photos_dir.c_str());
  if (!ctx.dump_dir.empty()) std::filesystem::create_directories(ctx.dump_dir);
  const fin::ResampleReference refs[] = {fin::ResampleReference::kPil, fin::ResampleReference::kTorchvision};
  const fin::ResampleFilter filters[] = {fin::ResampleFilter::kBilinear, fin::ResampleFilter::kBicubic,
                                         fin::ResampleFilter::kLanczos};
  const auto kPil = fin::ResampleReference::kPil, kTv = fin::ResampleReference::kTorchvision;
  const auto kBicubic = fin::ResampleFilter::kBicubic, kBilinear = fin::ResampleFilter::kBilinear;
  bool wide_done = false;
  for (const Photo& photo : photos) {
    if (ctx.context_lost) return;
    std::unique_ptr<Inputs> in;
    ctx.run("resize", "upload " + photo.name + " " + size_name(photo.h, photo.w), [&]() -> Outcome {
      in = upload({&photo});
      return {true, ""};
    });
    if (!in) continue;
    const auto [th, tw] = smart_resize(photo.h, photo.w);
    const std::string base = photo.name + "_" + size_name(photo.h, photo.w);
    for (const auto ref : refs) {
      for (const auto filter : filters) {
        const bool pil = ref == kPil;
        const bool vf = pil && vertical_first(ctx.pil_rule, photo.h, photo.w, th, tw);
        const std::string tag = base + "_" + ref_name(ref) + "_" + filter_name(filter) + "_" + size_name(th, tw);
        check_job(ctx, {"rows " + tag, &in->hwc, whole(th, tw, filter, ref, vf, true), false}, *in, true);
        check_job(ctx, {tag, &in->chw, whole(th, tw, filter, ref, vf, false), true}, *in, false);
        if (pil && photo.h * photo.w < 1000000 && th != photo.h && tw != photo.w) {  // the other pass order
          check_job(ctx,
                    {"rows " + tag + (vf ? " horizontal first" : " vertical first"), &in->hwc,
                     whole(th, tw, filter, ref, !vf, true), false},
                    *in, true);
        }
      }
    }
    if (photo.h == 1080 && photo.w == 1920) {
      for (const auto ref : refs) {  // CLIP: shortest edge 224, center crop 224, planar bf16
        check_job(ctx,
                  {"clip224 " + base + "_" + ref_name(ref) + "_bicubic",
                   &in->hwc,
                   {224, 398, 0, 87, 224, 224, kBicubic, ref, false, false},
                   false},
                  *in, true);
      }
      // Patch rows laid out channel-last (Gemma 4's, LFM2-VL's order), P 16 (T 2, m 2): the layout's other walk.
      ResizeJob channels_last = whole(544, 960, kBicubic, kTv, false, true);
      channels_last.patch = 16;
      channels_last.channels_last = true;
      check_job(ctx, {"rows channels-last " + base + " -> 544x960 torchvision bicubic", &in->hwc, channels_last, false},
                *in, true);
      // One axis only: both references skip the pass whose size does not change.
      check_job(ctx,
                {"width only " + base + " -> 1080x1316 pil bilinear", &in->chw,
                 whole(1080, 1316, kBilinear, kPil, false, false), false},
                *in, true);
      check_job(ctx,
                {"height only " + base + " -> 728x1920 torchvision bicubic", &in->chw,
                 whole(728, 1920, kBicubic, kTv, false, false), false},
                *in, true);
      // Padding (issue 35): the crop on a canvas of the fill, written by the same kernel: a letterboxed planar
      // image (fill 0 above and below) and Qwen2-VL rows of a canvas padded on every side (fill 255).
      ResizeJob letterbox = whole(216, 384, kBicubic, kPil, false, false);
      letterbox.pad = {384, 384, 84, 0, 0};
      check_job(ctx, {"padded " + base + " -> 216x384 on 384x384", &in->hwc, letterbox, false}, *in, true);
      ResizeJob framed = whole(224, 392, kBilinear, kTv, false, true);
      framed.pad = {280, 420, 30, 14, 255};
      check_job(ctx, {"rows padded " + base + " -> 224x392 on 280x420", &in->chw, framed, false}, *in, true);
      // No axis changes size (Qwen's smart_resize keeps a 12 MP photo as it is): the crop, copied in the
      // same kernel, as uint8 and bf16 rows from HWC and as f32 planar from CHW.
      const ResizeJob kept{1080, 1920, 8, 8, 1064, 1904, kBicubic, kPil, false, true};
      check_job(ctx, {"rows no resample " + base + " crop 1064x1904", &in->hwc, kept, false}, *in, true);
      check_job(ctx, {"rows no resample, identity " + base + " crop 1064x1904", &in->hwc, kept, true}, *in, true);
      check_job(ctx,
                {"no resample " + base + " crop 1064x1904 planar",
                 &in->chw,
                 {1080, 1920, 8, 8, 1064, 1904, kBicubic, kTv, false, false},
                 false},
                *in, false);
    }
    if (photo.h == 3024 && photo.w == 4032 && !wide_done) {
      wide_done = true;
      check_job(ctx,
                {"rows " + base + "_pil_bicubic forced 64-bit", &in->hwc,
                 whole(th, tw, kBicubic, kPil, vertical_first(ctx.pil_rule, photo.h, photo.w, th, tw), true), false,
                 Index::k64},
                *in, true);
    }
  }
  std::vector<const Photo*> batch;  // every 1920x1080 photo in one call, Qwen rows
  for (const Photo& p : photos)
    if (p.h == 1080 && p.w == 1920) batch.push_back(&p);
  if (batch.size() > 1 && !ctx.context_lost) {
    std::unique_ptr<Inputs> in;
    ctx.run("resize", "upload the 1920x1080 batch", [&]() -> Outcome {
      in = upload(batch);
      return {true, std::to_string(batch.size()) + " photos"};
    });
    if (in) {
      check_job(ctx,
                {"rows batch of " + std::to_string(batch.size()) + " 1920x1080 pil bicubic", &in->hwc,
                 whole(728, 1316, kBicubic, kPil, vertical_first(ctx.pil_rule, 1080, 1920, 728, 1316), true), false},
                *in, true);
    }
  }
  // A video clip of 6 frames, two per temporal patch: the smallest photo, each frame its pixels XOR a
  // different byte (so that a frame in the wrong slot shows).
  const Photo* smallest = &photos[0];
  for (const Photo& p : photos)
    if (p.h * p.w < smallest->h * smallest->w) smallest = &p;
  std::vector<Photo> frames(6, *smallest);
  std::vector<const Photo*> clip;
  for (size_t k = 0; k < frames.size(); ++k) {
    for (uint8_t& v : frames[k].hwc) v = static_cast<uint8_t>(v ^ (k * 37));
    clip.push_back(&frames[k]);
  }
  if (!ctx.context_lost) {
    std::unique_ptr<Inputs> in;
    ctx.run("resize", "upload a clip of 6 frames", [&]() -> Outcome {
      in = upload(clip);
      return {true, size_name(clip[0]->h, clip[0]->w)};
    });
    if (in) {
      const auto [th, tw] = smart_resize(clip[0]->h, clip[0]->w, 28, 128 * 28 * 28, 28 * 28 * 768);
      for (const auto ref : refs) {
        ResizeJob r = whole(th, tw, kBicubic, ref,
                            ref == kPil && vertical_first(ctx.pil_rule, clip[0]->h, clip[0]->w, th, tw), true);
        r.clip = true;
        check_job(ctx,
                  {"clip rows 6 frames " + size_name(clip[0]->h, clip[0]->w) + " -> " + size_name(th, tw) + " " +
                       ref_name(ref) + " bicubic",
                   &in->hwc, r, false},
                  *in, true);
        r.vertical_first = false;
        check_job(ctx,
                  {"clip rows 6 frames CHW " + std::string(ref_name(ref)) + " horizontal first", &in->chw, r, false},
                  *in, false);
      }
    }
  }
}

namespace {

// ---- video clips in clip mode (issue 26): the rows that measure PERF_NOTES.md's SASS prediction ----------
// A decoded clip: `frames` frames of h x w, a window moving 2 rows and 3 columns a frame across a photo (as
// the CPU benchmark's make_clip), uint8 HWC, resized in clip mode (torchvision bicubic: the video
// processors' reference) into Qwen-VL rows (T 2, merge 2, patch 14 or 16). These rows are timing rows: the
// host reference of a whole clip (up to 64 frames of 1080p) would cost the check seconds, so only the first
// and the last temporal patch are compared, bit for bit, with the host reference of their own two frames (a
// group's rows depend on its frames alone). The clip's upload is timed too (pinned and pageable host memory).
struct ClipClip {
  int64_t frames, h, w;  // the window moves across the first photo large enough for it
};

struct ClipCase {
  std::string name;
  int64_t out_h, out_w, patch;
  bool f32;
};

struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(size_t bytes) { CHECK_CUDA(cudaMallocHost(&ptr, bytes)); }
  ~PinnedBuffer() {
    if (ptr) cudaFreeHost(ptr);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

template <typename out_t>
void time_clip(Context& ctx, const ClipCase& c, const Image& clip, const DeviceBuffer& din, double h2d_pinned_us,
               double h2d_pageable_us) {
  const ResizeJob job{c.out_h,
                      c.out_w,
                      0,
                      0,
                      c.out_h,
                      c.out_w,
                      fin::ResampleFilter::kBicubic,
                      fin::ResampleReference::kTorchvision,
                      false,
                      true,
                      true,
                      c.patch};
  std::unique_ptr<DevicePlan> plan;
  std::unique_ptr<DeviceBuffer> out;
  ctx.run("timing", "prepare " + c.name, [&]() -> Outcome {
    plan = make_plan({c.name, &clip, job, false}, false);
    out = std::make_unique<DeviceBuffer>(plan->plan.numel * sizeof(out_t));
    return {true, std::to_string(plan->plan.numel) + " values"};
  });
  if (!plan || !out) return;
  const uint8_t* in = din.as<uint8_t>();
  auto* y = out->as<out_t>();
  ctx.run("timing", "first and last temporal patch of " + c.name + " against the host reference", [&]() -> Outcome {
    const fin::ResizePlan& p = plan->plan;
    CHECK_CUDA(cudaMemset(y, 0xFF, p.numel * sizeof(out_t)));
    launch_first(*plan, in, ctx.device);
    const std::string ran = launch_last<out_t>(*plan, in, y, Index::kAuto, ctx.device);
    const int64_t groups = p.batch / p.temporal, per_group = p.numel / groups;
    std::string diff;
    for (const int64_t g : {int64_t{0}, groups - 1}) {
      Image two = clip;  // the group's two frames alone
      two.data = clip.data + g * p.temporal * clip.s[0];
      two.B = p.temporal;
      const HostResize host = host_resize(two, c.out_h, c.out_w, job.filter, job.reference, false);
      const fin::ResizePlan hp = make_resize_plan(two, job, host.rows.empty() ? nullptr : host.rows.data(),
                                                  host.cols.empty() ? nullptr : host.cols.data());
      const std::vector<out_t> want = expected_output<out_t>(hp, host.resized, kClipW, kClipB);
      std::vector<out_t> got(static_cast<size_t>(per_group));
      if (want.size() != got.size()) return {false, "a group's reference has another size"};
      CHECK_CUDA(cudaMemcpy(got.data(), y + g * per_group, per_group * sizeof(out_t), cudaMemcpyDeviceToHost));
      diff += compare_values(got, want, g == 0 ? "first temporal patch" : "last temporal patch");
    }
    return {diff.empty(), ran + (diff.empty() ? ", 2 of " + std::to_string(groups) + " groups equal" : ": " + diff)};
  });
  std::string extra;
  ctx.run("timing", "passes of " + c.name, [&]() -> Outcome {
    const double first = time_us(ctx, [&] { launch_first(*plan, in, ctx.device); });
    const double second = time_us(ctx, [&] { launch_last<out_t>(*plan, in, y, Index::kAuto, ctx.device); });
    extra = Json()
                .num("first_pass_us", first)
                .num("second_pass_us", second)
                .integer("workspace_bytes", plan->ws_bytes)
                .integer("frames", clip.B)
                .num("h2d_pinned_us", h2d_pinned_us)
                .num("h2d_pageable_us", h2d_pageable_us)
                .text();
    extra = extra.substr(1, extra.size() - 2);
    std::printf("  %s: first pass %.1f us, second pass (fused) %.1f us, workspace %lld bytes\n", c.name.c_str(), first,
                second, static_cast<long long>(plan->ws_bytes));
    return {true, ""};
  });
  const double read = static_cast<double>(clip.B * clip.H * clip.W * 3);
  const double written = static_cast<double>(plan->plan.numel) * sizeof(out_t);
  report_timing(
      ctx, c.name, "clip mode: resample_pass + affine_strided_source (ResampledSource)", read, written,
      [&] {
        launch_first(*plan, in, ctx.device);
        launch_last<out_t>(*plan, in, y, Index::kAuto, ctx.device);
      },
      extra);
}

void clip_timing(Context& ctx, const std::vector<Photo>& photos) {
  // Qwen2-VL at the checkpoints' max_pixels (12845056: each frame to its own smart_resize), at the video
  // processor's class defaults (the CPU benchmark's size), and Qwen3-VL's class defaults (P 16, the clip's
  // pixel budget): the sizes of fused_input_norm's FusedVideoProcessor for these clips.
  const std::vector<std::pair<ClipClip, std::vector<ClipCase>>> clips = {
      {{32, 720, 1280},
       {{"clip 32x1280x720 -> 1288x728 qwen2-vl rows bf16 (checkpoint max_pixels), torchvision bicubic", 728, 1288, 14,
         false},
        {"clip 32x1280x720 -> 1288x728 qwen2-vl rows f32 (checkpoint max_pixels), torchvision bicubic", 728, 1288, 14,
         true},
        {"clip 32x1280x720 -> 1008x560 qwen2-vl rows f32 (class defaults), torchvision bicubic", 560, 1008, 14, true},
        {"clip 32x1280x720 -> 192x96 qwen3-vl rows f32 (P 16, class defaults), torchvision bicubic", 96, 192, 16,
         true}}},
      {{64, 1080, 1920},
       {{"clip 64x1920x1080 -> 1932x1092 qwen2-vl rows bf16 (checkpoint max_pixels), torchvision bicubic", 1092, 1932,
         14, false},
        {"clip 64x1920x1080 -> 1932x1092 qwen2-vl rows f32 (checkpoint max_pixels), torchvision bicubic", 1092, 1932,
         14, true},
        {"clip 64x1920x1080 -> 1008x560 qwen2-vl rows f32 (class defaults), torchvision bicubic", 560, 1008, 14, true},
        {"clip 64x1920x1080 -> 128x64 qwen3-vl rows f32 (P 16, class defaults), torchvision bicubic", 64, 128, 16,
         true}}},
  };
  for (const auto& entry : clips) {
    const ClipClip& cl = entry.first;
    const std::vector<ClipCase>& cases = entry.second;
    if (ctx.context_lost) return;
    const Photo* src = nullptr;
    for (const Photo& p : photos)
      if (!src && p.h >= cl.h + 2 * (cl.frames - 1) && p.w >= cl.w + 3 * (cl.frames - 1)) src = &p;
    if (!src) continue;
    const size_t frame = static_cast<size_t>(cl.h * cl.w * 3), bytes = frame * cl.frames;
    std::vector<uint8_t> host(bytes);
    std::unique_ptr<DeviceBuffer> din;
    double pinned_us = 0, pageable_us = 0;
    const std::string what = std::to_string(cl.frames) + "x" + size_name(cl.w, cl.h) + " clip";  // W x H
    ctx.run("timing", "upload a " + what + " from " + src->name + " " + size_name(src->h, src->w), [&]() -> Outcome {
      for (int64_t k = 0; k < cl.frames; ++k)
        for (int64_t r = 0; r < cl.h; ++r)
          std::memcpy(host.data() + k * frame + r * cl.w * 3, src->hwc.data() + ((r + 2 * k) * src->w + 3 * k) * 3,
                      cl.w * 3);
      din = std::make_unique<DeviceBuffer>(bytes);
      pageable_us =
          time_us(ctx, [&] { CHECK_CUDA(cudaMemcpy(din->as(), host.data(), bytes, cudaMemcpyHostToDevice)); }, 5);
      const PinnedBuffer pinned(bytes);
      std::memcpy(pinned.ptr, host.data(), bytes);
      pinned_us =
          time_us(ctx, [&] { CHECK_CUDA(cudaMemcpyAsync(din->as(), pinned.ptr, bytes, cudaMemcpyHostToDevice)); }, 5);
      std::printf("  upload of the %s (%.1f MB): pinned %.1f us (%.1f GB/s), pageable %.1f us (%.1f GB/s)\n",
                  what.c_str(), bytes / 1e6, pinned_us, bytes / (pinned_us * 1e3), pageable_us,
                  bytes / (pageable_us * 1e3));
      ctx.timings.push_back(Json()
                                .str("case", "upload " + what)
                                .num("us", pinned_us)  // every timings row has `us` (peers.py reads it)
                                .num("bytes", static_cast<double>(bytes))
                                .num("h2d_pinned_us", pinned_us)
                                .num("h2d_pageable_us", pageable_us)
                                .text());
      return {true, std::to_string(pinned_us) + " us pinned"};
    });
    if (!din) continue;
    const Image clip{host.data(), cl.frames, 3, cl.h, cl.w, {cl.h * cl.w * 3, 1, cl.w * 3, 3}};
    for (const ClipCase& c : cases) {
      if (ctx.context_lost) return;
      if (c.f32) {
        time_clip<float>(ctx, c, clip, *din, pinned_us, pageable_us);
      } else {
        time_clip<fin::bfloat16_bits>(ctx, c, clip, *din, pinned_us, pageable_us);
      }
    }
  }
}

}  // namespace

void resize_timing(Context& ctx) {
  const std::vector<Photo> photos = load_photos(ctx.photos_dir);
  const auto find = [&](int64_t h) -> const Photo* {
    for (const Photo& p : photos)
      if (p.h == h && (p.name == "coffee" || p.name == "synthetic")) return &p;
    for (const Photo& p : photos)
      if (p.h == h) return &p;
    return nullptr;
  };
  struct Timed {
    std::string name;
    std::vector<const Photo*> batch;
    fin::ResampleReference ref;
    bool clip;
    bool kept = false;  // at its own size (the checkpoint's max_pixels): the copy into rows
  };
  std::vector<Timed> cases;
  for (const int64_t h : {3024, 1080}) {
    const Photo* p = find(h);
    if (!p) continue;
    const auto [th, tw] = smart_resize(p->h, p->w);
    for (const auto ref : {fin::ResampleReference::kPil, fin::ResampleReference::kTorchvision}) {
      cases.push_back({"resize " + std::to_string(p->w) + "x" + std::to_string(p->h) + " -> " + std::to_string(tw) +
                           "x" + std::to_string(th) + " qwen rows bf16, " + ref_name(ref) + " bicubic",
                       {p},
                       ref,
                       false});
    }
  }
  if (const Photo* p = find(1080)) {
    cases.push_back(
        {"resize clip 224 (crop) of 1920x1080 bf16 NCHW, pil bicubic", {p}, fin::ResampleReference::kPil, true});
  }
  if (const Photo* p = find(3024)) {
    cases.push_back({"no resample 4032x3024 qwen rows bf16 (checkpoint max_pixels)",
                     {p},
                     fin::ResampleReference::kPil,
                     false,
                     true});
  }
  std::vector<const Photo*> twelve;
  for (const Photo& p : photos)
    if (p.h == 3024 && p.w == 4032) twelve.push_back(&p);
  for (size_t k = 0; !twelve.empty() && twelve.size() < 8; ++k) twelve.push_back(twelve[k]);
  if (twelve.size() == 8) {
    cases.push_back({"resize batch of 8 x 12 MP 4032x3024 -> 1148x840 qwen rows bf16, pil bicubic", twelve,
                     fin::ResampleReference::kPil, false});
  }
  for (const Timed& t : cases) {
    if (ctx.context_lost) return;
    std::unique_ptr<Inputs> in;
    std::unique_ptr<DevicePlan> plan;
    std::unique_ptr<DeviceBuffer> out;
    ctx.run("timing", "prepare " + t.name, [&]() -> Outcome {
      in = upload(t.batch);
      const Photo& p = *t.batch[0];
      const auto [th, tw] = t.kept ? std::pair<int64_t, int64_t>{p.h, p.w} : smart_resize(p.h, p.w);
      const bool vf = t.ref == fin::ResampleReference::kPil && vertical_first(ctx.pil_rule, p.h, p.w, th, tw);
      const ResizeJob r = t.clip
                              ? ResizeJob{224, 398, 0, 87, 224, 224, fin::ResampleFilter::kBicubic, t.ref, false, false}
                              : whole(th, tw, fin::ResampleFilter::kBicubic, t.ref, vf, true);
      plan = make_plan({t.name, &in->hwc, r, false}, false);
      out = std::make_unique<DeviceBuffer>(plan->plan.numel * 2);
      return {true, ""};
    });
    if (!plan || !out) continue;
    const uint8_t* din = in->dhwc.as<uint8_t>();
    auto* y = out->as<fin::bfloat16_bits>();
    std::string extra;
    ctx.run("timing", "passes of " + t.name, [&]() -> Outcome {
      const double first = plan->plan.two_passes() ? time_us(ctx, [&] { launch_first(*plan, din, ctx.device); }) : 0;
      const double second = time_us(ctx, [&] { launch_last(*plan, din, y, Index::kAuto, ctx.device); });
      extra = Json()
                  .num("first_pass_us", first)
                  .num("second_pass_us", second)
                  .integer("workspace_bytes", plan->ws_bytes)
                  .text();
      extra = extra.substr(1, extra.size() - 2);
      std::printf("  %s: first pass %.1f us, second pass (fused) %.1f us, workspace %lld bytes\n", t.name.c_str(),
                  first, second, static_cast<long long>(plan->ws_bytes));
      return {true, ""};
    });
    const double read = static_cast<double>(in->hwc.B * in->hwc.H * in->hwc.W * 3);
    const double written = static_cast<double>(plan->plan.numel) * 2;
    report_timing(
        ctx, t.name, "resample_pass + affine_strided_source (ResampledSource)", read, written,
        [&] {
          launch_first(*plan, din, ctx.device);
          launch_last(*plan, din, y, Index::kAuto, ctx.device);
        },
        extra);
  }
  clip_timing(ctx, photos);
}

}  // namespace gpu_check
