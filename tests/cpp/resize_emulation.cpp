// Runs the resize's GPU per-thread code (resample_kernel.h: the first pass's threads, then the affine's
// strided walker with the resampled source) on the host, one emulated thread after another, for one image,
// and writes the result: tests/test_resize_emulation.py compares it with Pillow and torchvision themselves.
// The plan comes from the same host planner the op uses; weight 1 and bias 0, so the output is the
// resampled uint8 values as float32 in the output layout. Both index widths run and must agree.
//   resize_emulation IN C H W HWC OUT_H OUT_W FILTER REFERENCE VERTICAL_FIRST TOP LEFT CROP_H CROP_W T P M
//                    THREADS [CANVAS_H CANVAS_W PAD_TOP PAD_LEFT FILL] OUT
// FILTER: 0 bilinear, 1 bicubic, 2 lanczos, 3 cv2_cubic, 4 cv2_cubic_f32, 5 bilinear_no_antialias,
// 6 bilinear_no_antialias_f32, 7 bilinear_no_antialias_f32_cl, 8 bilinear_f32, 9 bicubic_f32; REFERENCE: 0 pil, 1
// torchvision; P = 0: planar output [C, h, w] (h, w: the canvas's with the five padding arguments, the crop's without;
// the padding is the fill byte).
//   resize_emulation --cpu ARGS...   the CPU op's kernels instead (resample_cpu_kernels.h: canvas_band over bands of
//                                    THREADS rows, the capability FUSED_INPUT_NORM_CPU_CAPABILITY selects), planar
//                                    output only: the resampling the op's writers then normalize. Torch-free, so it
//                                    runs where torch cannot (cross-built, under qemu-aarch64:
//                                    scripts/check_aarch64.sh).
//   resize_emulation --channels-last ARGS...   patch rows laid out [T, P, P, C] (P > 0), not [C, T, P, P].
//   resize_emulation --strips ARGS...   MiniCPM-V's strips [C, P, patches * P] (P > 0, T and M 1).
//   resize_emulation [--cpu] --float-input ARGS...   IN holds float32 values, not bytes (torch's float32
//                                    filters, 6 to 9, only: they read a float32 input as the op does).
//   resize_emulation --capabilities  the CPU capabilities this machine runs, one per line.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "affine_kernel.h"
#include "cpu_capability.h"
#include "resample_cpu_kernels.h"
#include "resample_kernel.h"

namespace fin = fused_input_norm;

namespace {

// `input`: the image's first element, bytes, or float32 values where plan.float_input (torch's float32 filters).
template <typename index_t>
std::vector<float> run(const fin::ResizePlan& plan, const void* input, int64_t threads) {
  const auto* image = static_cast<const uint8_t*>(input);
  std::array<int64_t, 4> strides = plan.strides;
  const uint8_t* src = image;
  std::vector<uint8_t> workspace;
  std::vector<float> float_workspace;  // the float32 first pass (cv2 filters, torch's float32 antialiased ones)
  if (plan.two_passes() && (fin::is_cv2(plan.filter) || fin::is_aa_f32(plan.filter))) {
    const auto shape = fin::intermediate_shape(plan);
    const auto n = static_cast<index_t>(plan.batch * plan.channels * shape[0] * shape[1]);
    float_workspace.assign(static_cast<size_t>(n), std::nanf(""));  // poison: every element must be written
    const fin::ResamplePass first = fin::first_pass(plan, image);
    for (int64_t t = 0; t < threads; ++t) {
      fin::float_first_pass_thread<index_t>(first, float_workspace.data(), static_cast<index_t>(plan.channels),
                                            static_cast<index_t>(shape[0]), static_cast<index_t>(shape[1]), n,
                                            static_cast<index_t>(t), static_cast<index_t>(threads));
    }
    strides = {plan.channels * shape[0] * shape[1], shape[0] * shape[1], shape[1], 1};
  } else if (plan.two_passes()) {
    const auto shape = fin::intermediate_shape(plan);
    const auto n = static_cast<index_t>(plan.batch * plan.channels * shape[0] * shape[1]);
    workspace.assign(static_cast<size_t>(n), 0xAB);  // poison: every element must be written
    const fin::ResamplePass first = fin::first_pass(plan, image);
    for (int64_t t = 0; t < threads; ++t) {
      fin::resample_pass_thread<index_t>(first, workspace.data(), static_cast<index_t>(plan.channels),
                                         static_cast<index_t>(shape[0]), static_cast<index_t>(shape[1]), n,
                                         static_cast<index_t>(t), static_cast<index_t>(threads));
    }
    src = workspace.data();
    strides = {plan.channels * shape[0] * shape[1], shape[0] * shape[1], shape[1], 1};
  }
  const fin::ResampledSource<index_t> source(
      plan, fin::is_linear_f32(plan.filter) ? fin::linear_f32_pass(plan, input)
            : float_workspace.empty()       ? fin::last_pass(plan, src, strides)
                                            : fin::float_rows_last_pass(plan, float_workspace.data(), strides));
  const auto calc = fin::make_offset_calculator<index_t>(plan.layout);
  const std::vector<float> weight(static_cast<size_t>(plan.channels), 1.0f), bias(weight.size(), 0.0f);
  std::vector<float> out(static_cast<size_t>(plan.numel), -1.0f);
  for (int64_t t = 0; t < threads; ++t) {
    fin::affine_strided_source_thread(source, out.data(), weight.data(), bias.data(), static_cast<index_t>(plan.numel),
                                      calc, static_cast<index_t>(t), static_cast<index_t>(threads));
  }
  return out;
}

// The CPU op's resampling of the canvas, band after band of `band_rows` rows, as uint8 values in float32.
std::vector<float> run_cpu(const fin::ResizePlan& plan, const void* input, int64_t band_rows) {
  const auto* image = static_cast<const uint8_t*>(input);
  fin::PairPlans pair_plans;
  const fin::PairPlans* pairs = nullptr;
  if (fin::vertical_madd_for_cpu() != nullptr) {  // as the op: the pmaddwd kernels' coefficients where they run
    pair_plans.row = fin::make_pair_plan(plan.row_plan);
    pair_plans.col = fin::make_pair_plan(plan.col_plan);
    pairs = &pair_plans;
  }
  const int64_t C = plan.channels, h = plan.canvas_h, w = plan.canvas_w;
  std::vector<float> out(static_cast<size_t>(C * h * w), -1.0f);
  std::vector<uint8_t> band;
  std::vector<float> cv2_band;
  for (int64_t y0 = 0; y0 < h; y0 += band_rows) {
    const int64_t rows = std::min(band_rows, h - y0);
    const bool linear = fin::is_linear_f32(plan.filter), aa = fin::is_aa_f32(plan.filter);
    if (fin::is_cv2(plan.filter) || linear || aa) {  // the op's float32 band (OpenCV's cubic, torch's float filters)
      cv2_band.assign(static_cast<size_t>(C * rows * w), std::nanf(""));
      if (linear || aa) {
        fin::with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
          fin::torch_float_canvas_band<cap>(plan, input, 0, y0, rows, cv2_band.data());
        });
      } else {
        fin::cv2_canvas_band(plan, image, 0, y0, rows, cv2_band.data());
      }
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t i = 0; i < rows * w; ++i)
          out[static_cast<size_t>((c * h + y0) * w + i)] = cv2_band[c * rows * w + i];
      }
      continue;
    }
    band.assign(static_cast<size_t>(C * rows * w), 0xAB);  // poison: every byte must be written
    fin::with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {
      fin::canvas_band<cap>(plan, pairs, 1, image, 0, 0, y0, rows, band.data());
    });
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t i = 0; i < rows * w; ++i) out[static_cast<size_t>((c * h + y0) * w + i)] = band[c * rows * w + i];
    }
  }
  fin::release_large_scratch();  // as the op does after a thread's share of a call
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--capabilities") == 0) {
    for (auto cap : {fin::CpuCapability::kDefault, fin::CpuCapability::kAvx2, fin::CpuCapability::kAvx512,
                     fin::CpuCapability::kNeon}) {
      if (fin::cpu_supports(cap)) std::printf("%s\n", fin::cpu_capability_name(cap));
    }
    return 0;
  }
  bool cpu = false, float_input = false;
  fin::PatchLayout layout = fin::PatchLayout::kChannelsFirst;
  for (; argc > 1; ++argv, --argc) {
    if (std::strcmp(argv[1], "--cpu") == 0) {
      cpu = true;
    } else if (std::strcmp(argv[1], "--float-input") == 0) {
      float_input = true;
    } else if (std::strcmp(argv[1], "--channels-last") == 0) {
      layout = fin::PatchLayout::kChannelsLast;
    } else if (std::strcmp(argv[1], "--strips") == 0) {
      layout = fin::PatchLayout::kStrips;
    } else {
      break;
    }
  }
  if (argc != 20 && argc != 25) {
    std::fprintf(stderr, "usage: see the comment at the top of resize_emulation.cpp\n");
    return 2;
  }
  int64_t a[22] = {};
  for (int i = 0; i < argc - 3; ++i) a[i] = std::atoll(argv[2 + i]);
  const int64_t C = a[0], H = a[1], W = a[2];
  const bool hwc = a[3] != 0;
  std::vector<uint8_t> image(static_cast<size_t>(C * H * W) * (float_input ? sizeof(float) : 1));
  FILE* in = std::fopen(argv[1], "rb");
  if (!in || std::fread(image.data(), 1, image.size(), in) != image.size()) return 3;
  std::fclose(in);
  std::vector<float> float_image(float_input ? static_cast<size_t>(C * H * W) : 0);
  if (float_input) std::memcpy(float_image.data(), image.data(), image.size());

  fin::ResizePlan plan{};
  plan.batch = 1;
  plan.channels = C;
  plan.in_h = H;
  plan.in_w = W;
  plan.out_h = a[4];
  plan.out_w = a[5];
  plan.filter = static_cast<fin::ResampleFilter>(a[6]);
  plan.float_input = float_input;
  if (float_input && !fin::reads_float_input(plan.filter)) {
    std::fprintf(stderr, "--float-input: torch's float32 filters (6 to 9) only\n");
    return 2;
  }
  const auto reference = static_cast<fin::ResampleReference>(a[7]);
  plan.vertical_first = a[8] != 0;
  plan.top = a[9];
  plan.left = a[10];
  plan.crop_h = a[11];
  plan.crop_w = a[12];
  plan.temporal = a[13];
  plan.patch = a[14];
  plan.merge = a[15];
  plan.patch_layout = layout;
  const int64_t threads = a[16];
  if (argc == 25) {  // otherwise canvas_h stays 0: the canvas is the crop (finish_resize_plan)
    plan.canvas_h = a[17];
    plan.canvas_w = a[18];
    plan.pad_top = a[19];
    plan.pad_left = a[20];
    plan.fill = a[21];
  }
  plan.strides = hwc ? std::array<int64_t, 4>{H * W * C, 1, W * C, C} : std::array<int64_t, 4>{C * H * W, H * W, W, 1};
  std::vector<int32_t> rows, cols;
  // OpenCV's cubic resamples both axes whenever the image changes size.
  const bool both = fin::is_cv2(plan.filter) && (plan.out_h != H || plan.out_w != W);
  if (plan.out_h != H || both) rows = fin::make_resample_plan(H, plan.out_h, plan.filter, reference);
  if (plan.out_w != W || both) cols = fin::make_resample_plan(W, plan.out_w, plan.filter, reference);
  plan.row_plan = rows.empty() ? nullptr : rows.data();
  plan.col_plan = cols.empty() ? nullptr : cols.data();
  fin::finish_resize_plan(plan);

  if (cpu && plan.patch != 0) {
    std::fprintf(stderr, "--cpu writes planar output only (P = 0)\n");
    return 2;
  }
  const void* input = float_input ? static_cast<const void*>(float_image.data()) : image.data();
  const std::vector<float> narrow = cpu ? run_cpu(plan, input, threads) : run<uint32_t>(plan, input, threads);
  const std::vector<float> wide = cpu ? narrow : run<uint64_t>(plan, input, threads + 2);
  if (std::memcmp(narrow.data(), wide.data(), narrow.size() * sizeof(float)) != 0) {
    std::fprintf(stderr, "32-bit and 64-bit indexing disagree\n");
    return 4;
  }
  FILE* out = std::fopen(argv[argc - 1], "wb");
  if (!out || std::fwrite(narrow.data(), sizeof(float), narrow.size(), out) != narrow.size()) return 5;
  std::fclose(out);
  return 0;
}
