// The affine on the GPU, one input dtype per build of this file (CHECK_IN = 0..4: uint8, uint16, float16,
// bfloat16, float32; build.sh compiles it five times, in parallel), every output dtype, every layout class,
// both index widths. Each output is compared bit for bit with the scalar formula the host emulation tests
// use (csrc/numerics.h: from_float(affine(to_float(x), w[c], b[c])), one rounding of the exact x*w+b, which
// the GPU's fmaf gives), over the view's own sizes and strides.
#include <cstring>
#include <random>

#include "affine_launch.h"
#include "check.h"

#ifndef CHECK_IN
#define CHECK_IN 0
#endif

namespace gpu_check {
namespace {

using in_t = std::conditional_t<
    CHECK_IN == 0, uint8_t,
    std::conditional_t<CHECK_IN == 1, uint16_t,
                       std::conditional_t<CHECK_IN == 2, fin::half_bits,
                                          std::conditional_t<CHECK_IN == 3, fin::bfloat16_bits, float>>>>;
constexpr const char* kInName[] = {"uint8", "uint16", "float16", "bfloat16", "float32"};

template <typename T>
uint32_t bits(T v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}

// Random inputs; float inputs also get zeros of both signs, subnormals, infinities and overflowing values
// at fixed positions (no NaN: its payload is not specified by either side).
template <typename T>
std::vector<T> random_input(int64_t n, std::mt19937& rng) {
  std::vector<T> x(static_cast<size_t>(n));
  std::uniform_real_distribution<float> any(-300.0f, 300.0f);
  const float specials[] = {0.0f, -0.0f, 1e-40f, 6e-8f, 65504.0f, 70000.0f, 3e38f, -INFINITY, INFINITY, 255.0f};
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      x[i] = static_cast<T>(rng());
    } else {
      const float f = i % 97 == 13 ? specials[(i / 97) % 10] : any(rng);
      x[i] = fin::from_float<T>(f);
    }
  }
  return x;
}

struct Case {
  std::string name;
  View view;
  int64_t in_offset, out_offset;  // elements past a 256-byte aligned base (misaligned slices)
  Index index;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  // Qwen-VL patch rows [N, 3 * 2 * 14 * 14], channel = column / 392: [N, 3, 392] contiguous.
  c.push_back({"patch rows [300,1176]", contiguous_view({300, 3, 392}, 1), 0, 0, Index::kAuto});
  c.push_back({"patch rows [300,1176] forced 64-bit", contiguous_view({300, 3, 392}, 1), 0, 0, Index::k64});
  c.push_back({"patch rows [1:] (input 1176 elements in)", contiguous_view({299, 3, 392}, 1), 1176, 0, Index::kAuto});
  for (const int64_t k : {1, 2, 4, 8}) {
    c.push_back({"contiguous misaligned by " + std::to_string(k) + " elements", contiguous_view({37, 3, 101}, 1), k, k,
                 Index::kAuto});
  }
  c.push_back({"NCHW [4,3,67,91]", contiguous_view({4, 3, 67, 91}, 1), 0, 0, Index::kAuto});
  c.push_back({"NHWC [4,37,29,3] (C=3)", contiguous_view({4, 37, 29, 3}, 3), 0, 0, Index::kAuto});
  c.push_back({"NHWC [2,16,17,4] (C=4)", contiguous_view({2, 16, 17, 4}, 3), 0, 0, Index::kAuto});
  c.push_back({"NHWC [3,11,13,2] (C=2) forced 64-bit", contiguous_view({3, 11, 13, 2}, 3), 0, 0, Index::k64});
  // HWC read as CHW: [N, C, H, W] with channels-last strides.
  c.push_back({"HWC->CHW [2,3,24,32]", {{2, 3, 24, 32}, {2304, 1, 96, 3}, 1}, 0, 0, Index::kAuto});
  c.push_back({"HWC->CHW [2,3,24,32] forced 64-bit", {{2, 3, 24, 32}, {2304, 1, 96, 3}, 1}, 0, 0, Index::k64});
  c.push_back(
      {"HWC->CHW [2,3,23,31] (pixels not whole vectors)", {{2, 3, 23, 31}, {2139, 1, 93, 3}, 1}, 0, 0, Index::kAuto});
  c.push_back({"HWC->CHW [2,4,23,31] (C=4) forced 64-bit", {{2, 4, 23, 31}, {2852, 1, 124, 4}, 1}, 0, 0, Index::k64});
  // Qwen-VL's patch view of one image [3, 56, 84] repeated T = 2 frames (stride 0): 9 dims, channel dim 5.
  {
    const int64_t C = 3, H = 56, W = 84, P = 14, m = 2, T = 2;
    const View image{
        {1, H / (P * m), W / (P * m), m, m, C, T, P, P}, {C * H * W, P * m * W, P * m, P * W, P, H * W, 0, W, 1}, 5};
    c.push_back({"patch view of a 3x56x84 image (T=2, stride 0)", image, 0, 0, Index::kAuto});
    c.push_back({"patch view of a 3x56x84 image forced 64-bit", image, 0, 0, Index::k64});
    const int64_t F = 4;  // a 4-frame video [F, C, H, W]: grid_t = F / T
    const View video{{F / T, H / (P * m), W / (P * m), m, m, C, T, P, P},
                     {T * C * H * W, P * m * W, P * m, P * W, P, H * W, C * H * W, W, 1},
                     5};
    c.push_back({"patch view of a 4-frame 3x56x84 video", video, 0, 0, Index::kAuto});
    c.push_back({"patch view of a 4-frame video forced 64-bit", video, 0, 0, Index::k64});
  }
  // Transposed, step-sliced and broadcast views.
  c.push_back({"transposed [33,3,7] channel inner", {{33, 7, 3}, {1, 99, 33}, 2}, 0, 0, Index::kAuto});
  c.push_back({"step-sliced [5,3,9,11] every 2nd column",
               {{5, 3, 9, 22 / 2}, {3 * 9 * 22, 9 * 22, 22, 2}, 1},
               0,
               0,
               Index::kAuto});
  c.push_back({"broadcast [8,3,17,19] (batch stride 0)", {{8, 3, 17, 19}, {0, 17 * 19, 19, 1}, 1}, 0, 0, Index::kAuto});
  c.push_back({"broadcast [8,3,17,19] forced 64-bit", {{8, 3, 17, 19}, {0, 17 * 19, 19, 1}, 1}, 0, 0, Index::k64});
  return c;
}

template <typename out_t>
Outcome run_case(Context& ctx, const Case& k, std::mt19937& rng) {
  const int64_t numel = k.view.numel(), span = k.view.span();
  const int64_t channels = k.view.sizes[k.view.channel_dim];
  const std::vector<in_t> x = random_input<in_t>(span, rng);
  std::vector<float> w(channels), b(channels);
  std::uniform_real_distribution<float> param(-2.0f, 2.0f);
  for (int64_t c = 0; c < channels; ++c) w[c] = param(rng), b[c] = param(rng);

  DeviceBuffer din((span + k.in_offset) * sizeof(in_t)), dout((numel + k.out_offset) * sizeof(out_t));
  DeviceBuffer dw(channels * sizeof(float)), db(channels * sizeof(float));
  in_t* in = din.as<in_t>() + k.in_offset;
  out_t* out = dout.as<out_t>() + k.out_offset;
  CHECK_CUDA(cudaMemcpy(in, x.data(), span * sizeof(in_t), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dw.as(), w.data(), channels * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db.as(), b.data(), channels * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(out, 0xFF, numel * sizeof(out_t)));  // poison: every element must be written
  const std::string ran = launch_affine(k.view, in, out, dw.as<float>(), db.as<float>(), k.index, ctx.device);
  std::vector<out_t> y(static_cast<size_t>(numel));
  CHECK_CUDA(cudaMemcpy(y.data(), out, numel * sizeof(out_t), cudaMemcpyDeviceToHost));

  const ViewWalker walk{k.view};
  int64_t bad = 0, first = -1;
  uint32_t got = 0, want = 0;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t offset, c;
    walk.locate(i, &offset, &c);
    const out_t e = fin::from_float<out_t>(fin::affine(fin::to_float(x[offset]), w[c], b[c]));
    if (bits(e) != bits(y[i])) {
      if (bad++ == 0) first = i, got = bits(y[i]), want = bits(e);
    }
  }
  if (bad == 0) return {true, ran + ", " + std::to_string(numel) + " values"};
  char msg[160];
  std::snprintf(msg, sizeof msg, "%lld of %lld values differ; first at %lld: got 0x%x, want 0x%x",
                static_cast<long long>(bad), static_cast<long long>(numel), static_cast<long long>(first), got, want);
  return {false, ran + ": " + msg};
}

template <typename out_t>
void run_out(Context& ctx, const char* out_name) {
  std::mt19937 rng(1234 + CHECK_IN);
  const std::string pair = std::string(kInName[CHECK_IN]) + "->" + out_name;
  for (const Case& k : cases()) {
    ctx.run("affine", pair + " " + k.name, [&] { return run_case<out_t>(ctx, k, rng); });
  }
}

}  // namespace

#define CHECK_CAT2(a, b) a##b
#define CHECK_CAT(a, b) CHECK_CAT2(a, b)
void CHECK_CAT(affine_cases_in, CHECK_IN)(Context& ctx) {
  run_out<fin::half_bits>(ctx, "float16");
  run_out<fin::bfloat16_bits>(ctx, "bfloat16");
  run_out<float>(ctx, "float32");
}

}  // namespace gpu_check
