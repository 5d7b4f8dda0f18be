// CPU self-test of the GPU check's host reference (resize_reference.h): the plain two-pass resize, the
// layouts' index formulas and the expected workspace must equal the kernels' own per-thread code run on the
// host (both index widths), over sizes (one kept as it is: no pass), crops, batches, HWC and CHW inputs,
// both references, the three filters and both pass orders; smart_resize must give transformers' sizes. Runs in CI,
// where the check itself cannot run (no GPU):
//   g++ -std=c++17 -O2 -pthread -Icsrc -Itests/cuda tests/cuda/reference_selftest.cpp -o selftest && ./selftest
#include <cstdio>
#include <random>

#include "resize_reference.h"

using namespace gpu_check;

namespace {

int passed = 0, failed = 0;

void report(bool ok, const std::string& what, const std::string& detail = "") {
  (ok ? passed : failed)++;
  if (!ok) std::printf("FAIL %s: %s\n", what.c_str(), detail.c_str());
}

template <typename out_t>
void check(const Image& in, const ResizeJob& j, const std::string& name) {
  const float w[3] = {0.0146f, -0.5f, 2.0f}, b[3] = {-1.79f, 0.25f, 0.0f};
  const HostResize host = host_resize(in, j.out_h, j.out_w, j.filter, j.reference, j.vertical_first);
  const fin::ResizePlan p = make_resize_plan(in, j, host.rows.empty() ? nullptr : host.rows.data(),
                                             host.cols.empty() ? nullptr : host.cols.data());
  const auto want = expected_output<out_t>(p, host.resized, w, b);
  std::vector<uint8_t> ws32, ws64;
  const auto got32 = emulate_resize<out_t, uint32_t>(p, in.data, w, b, 97, &ws32);
  const auto got64 = emulate_resize<out_t, uint64_t>(p, in.data, w, b, 5000, &ws64);
  std::string diff = compare_values(got32, want, "u32") + compare_values(got64, want, "u64");
  if (p.two_passes()) diff += compare_values(ws32, expected_workspace(p, host), "workspace");
  report(diff.empty(), name, diff);
}

}  // namespace

int main() {
  const std::pair<int64_t, int64_t> sizes[][2] = {
      {{3024, 4032}, {840, 1148}}, {{1080, 1920}, {728, 1316}}, {{400, 600}, {392, 588}}, {{300, 451}, {308, 448}},
      {{427, 640}, {420, 644}},    {{512, 512}, {504, 504}},    {{20, 20}, {56, 56}}};
  for (const auto& s : sizes) {
    const auto got = smart_resize(s[0].first, s[0].second);
    report(got == s[1], "smart_resize " + std::to_string(s[0].first) + "x" + std::to_string(s[0].second),
           std::to_string(got.first) + "x" + std::to_string(got.second));
  }
  report(vertical_first("13", 3024, 4032, 840, 1148) == false && vertical_first("13", 1000, 200, 112, 196) &&
             !vertical_first("12.1", 1000, 200, 112, 196) && vertical_first("12.2", 30000, 200, 112, 196),
         "vertical_first rules");

  std::mt19937 rng(5);
  const auto kPil = fin::ResampleReference::kPil, kTv = fin::ResampleReference::kTorchvision;
  for (const auto& [B, H, W, oh, ow] : std::vector<std::array<int64_t, 5>>{{1, 61, 83, 56, 112},
                                                                           {2, 130, 97, 84, 56},
                                                                           {1, 45, 170, 56, 56},
                                                                           {1, 200, 140, 168, 140},
                                                                           {1, 56, 300, 56, 84},
                                                                           {2, 112, 140, 112, 140},
                                                                           {4, 90, 120, 84, 112}}) {
    std::vector<uint8_t> data(static_cast<size_t>(B * H * W * 3));
    for (auto& v : data) v = static_cast<uint8_t>(rng() % 7 == 0 ? rng() : 100 + rng() % 50);
    const Image hwc{data.data(), B, 3, H, W, {H * W * 3, 1, W * 3, 3}};
    const Image chw{data.data(), B, 3, H, W, {H * W * 3, H * W, W, 1}};
    for (const auto ref : {kPil, kTv}) {
      for (const auto filter :
           {fin::ResampleFilter::kBilinear, fin::ResampleFilter::kBicubic, fin::ResampleFilter::kLanczos}) {
        for (const bool vf : {false, true}) {
          const std::string name = std::to_string(B) + "x" + std::to_string(H) + "x" + std::to_string(W) + " -> " +
                                   std::to_string(oh) + "x" + std::to_string(ow) + (ref == kPil ? " pil" : " tv") +
                                   (filter == fin::ResampleFilter::kBicubic   ? " bicubic"
                                    : filter == fin::ResampleFilter::kLanczos ? " lanczos"
                                                                              : " bilinear") +
                                   (vf ? " vertical first" : "");
          check<fin::bfloat16_bits>(hwc, {oh, ow, 0, 0, oh, ow, filter, ref, vf, true}, "rows " + name);
          check<float>(chw, {oh, ow, 0, 0, oh, ow, filter, ref, vf, false}, "planar " + name);
          check<float>(hwc, {oh, ow, oh / 4, ow / 3, oh / 2, ow / 2, filter, ref, vf, false}, "crop " + name);
          check<fin::bfloat16_bits>(chw, {oh, ow, 0, 28 * (ow >= 84), oh, 56, filter, ref, vf, true},
                                    "crop rows " + name);
          // Padded: planar with the crop off-centre on a larger canvas (fill 0), rows of a canvas padded on every
          // side to the next multiples of 28 (fill 255), and clip rows on a canvas padded below and right.
          ResizeJob padded{oh, ow, oh / 4, ow / 3, oh / 2, ow / 2, filter, ref, vf, false};
          padded.pad = {oh / 2 + 9, ow / 2 + 4, 7, 1, 0};
          check<float>(hwc, padded, "padded crop " + name);
          ResizeJob padded_rows{oh, ow, 0, 0, oh, ow, filter, ref, vf, true};
          padded_rows.pad = {oh + 28, ow + 56, 13, 27, 255};
          check<fin::bfloat16_bits>(chw, padded_rows, "padded rows " + name);
          if (B % 2 == 0) {  // the frames of a clip, two per temporal patch
            ResizeJob padded_clip{oh, ow, 0, 0, oh, ow, filter, ref, vf, true, true};
            padded_clip.pad = {oh + 28, ow + 28, 0, 0, 128};
            check<float>(hwc, padded_clip, "padded clip rows " + name);
            check<float>(hwc, {oh, ow, 0, 0, oh, ow, filter, ref, vf, true, true}, "clip rows " + name);
          }
        }
      }
    }
  }
  std::printf("reference self-test: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
