// The affine past 2^31 elements (64-bit indexing: contiguous, channels-last planar, strided), and the
// affine's timed cases against the copy floor. Inputs are filled on the device from a hash of the index, which
// the host recomputes; the > 2^31 outputs are checked on a sample (the first and last million values and two
// million random ones), gathered on the device.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>

#include "affine_launch.h"
#include "check.h"

namespace gpu_check {
namespace {

template <typename T>
__host__ __device__ T hashed(uint64_t i) {
  const uint32_t h = hash32(i);
  if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<uint8_t>(h);
  } else {
    return fin::from_float<T>(static_cast<float>(h & 0xFFFF) * (1.0f / 256.0f) - 100.0f);
  }
}

template <typename T>
__global__ void fill_kernel(T* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    p[i] = hashed<T>(i);
  }
}

template <typename T>
__global__ void gather_kernel(const T* src, const int64_t* index, T* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[index[i]];
  }
}

template <typename T>
void fill(T* p, uint64_t n) {
  fill_kernel<T><<<1024, 256>>>(p, n);
  CHECK_CUDA(cudaGetLastError());
}

const float kClipW[3] = {1 / (255 * 0.26862954f), 1 / (255 * 0.26130258f), 1 / (255 * 0.27577711f)};
const float kClipB[3] = {-0.48145466f / 0.26862954f, -0.4578275f / 0.26130258f, -0.40821073f / 0.27577711f};

struct Params {
  DeviceBuffer w{3 * sizeof(float)}, b{3 * sizeof(float)};
  Params() {
    CHECK_CUDA(cudaMemcpy(w.as(), kClipW, sizeof kClipW, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b.as(), kClipB, sizeof kClipB, cudaMemcpyHostToDevice));
  }
};

template <typename T>
uint32_t bits(T v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}

// A sample of the output: the first and last 2^20 indices and 2^21 random ones.
std::vector<int64_t> sample_indices(int64_t numel) {
  std::vector<int64_t> idx;
  const int64_t edge = std::min<int64_t>(numel, 1 << 20);
  for (int64_t i = 0; i < edge; ++i) idx.push_back(i), idx.push_back(numel - 1 - i);
  std::mt19937_64 rng(7);
  for (int i = 0; i < (1 << 21); ++i) idx.push_back(static_cast<int64_t>(rng() % numel));
  return idx;
}

template <typename out_t>
Outcome big_case(Context& ctx, const View& view, const uint8_t* in, out_t* out, const Params& p) {
  const int64_t numel = view.numel();
  const std::string ran = launch_affine(view, in, out, p.w.as<float>(), p.b.as<float>(), Index::kAuto, ctx.device);
  const std::vector<int64_t> idx = sample_indices(numel);
  const auto n = static_cast<int64_t>(idx.size());
  DeviceBuffer didx(n * sizeof(int64_t)), dsample(n * sizeof(out_t));
  CHECK_CUDA(cudaMemcpy(didx.as(), idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
  gather_kernel<out_t><<<1024, 256>>>(out, didx.as<int64_t>(), dsample.as<out_t>(), n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<out_t> got(static_cast<size_t>(n));
  CHECK_CUDA(cudaMemcpy(got.data(), dsample.as(), n * sizeof(out_t), cudaMemcpyDeviceToHost));
  std::atomic<int64_t> bad{0}, first{-1};
  parallel_for(n, [&](int64_t begin, int64_t end) {
    const ViewWalker walk{view};
    for (int64_t k = begin; k < end; ++k) {
      int64_t offset, c;
      walk.locate(idx[k], &offset, &c);
      const out_t e = fin::from_float<out_t>(fin::affine(fin::to_float(hashed<uint8_t>(offset)), kClipW[c], kClipB[c]));
      if (bits(e) != bits(got[k]) && bad++ == 0) first = idx[k];
    }
  });
  const std::string what = ran + ", " + std::to_string(numel) + " values, " + std::to_string(n) + " checked";
  if (bad == 0) return {true, what};
  return {false, what + ": " + std::to_string(bad.load()) + " differ, first at " + std::to_string(first.load())};
}

}  // namespace

void big_cases(Context& ctx) {
  // [rows, 3, 392] = patch rows [rows, 1176], past 2^31 elements; the same bytes as HWC [rows, 392, 3]; and the
  // patch view of a 3568-frame 448x448 video (9 dims, T = 2).
  const int64_t rows = 1826128, numel = rows * 1176;  // 2,147,526,528 > 2^31
  const int64_t frames = 3568, video = frames * 3 * 448 * 448;
  const int64_t n_in = std::max(numel, video);
  std::unique_ptr<DeviceBuffer> in, out;
  std::unique_ptr<Params> params;
  ctx.run("big", "allocate and fill 2.15 GB of uint8 + 4.3 GB of output", [&]() -> Outcome {
    in = std::make_unique<DeviceBuffer>(n_in);
    out = std::make_unique<DeviceBuffer>(n_in * 2);
    params = std::make_unique<Params>();
    fill(in->as<uint8_t>(), n_in);
    return {true, std::to_string(n_in) + " input bytes"};
  });
  if (!in || !out || !params) return;
  const uint8_t* x = in->as<uint8_t>();
  const View rows_view = contiguous_view({rows, 3, 392}, 1);
  ctx.run("big", "patch rows [1826128,1176] u8->bf16 (> 2^31 elements)",
          [&] { return big_case(ctx, rows_view, x, out->as<fin::bfloat16_bits>(), *params); });
  const View hwc{{1, 3, rows, 392}, {numel, 1, 392 * 3, 3}, 1};
  ctx.run("big", "HWC->CHW [1,3,1826128,392] u8->f16 (> 2^31 elements)",
          [&] { return big_case(ctx, hwc, x, out->as<fin::half_bits>(), *params); });
  const int64_t C = 3, H = 448, W = 448, P = 14, m = 2, T = 2;
  const View patches{{frames / T, H / (P * m), W / (P * m), m, m, C, T, P, P},
                     {T * C * H * W, P * m * W, P * m, P * W, P, H * W, C * H * W, W, 1},
                     5};
  ctx.run("big", "patch view of a 3568-frame 3x448x448 video u8->bf16 (> 2^31, strided 64-bit)",
          [&] { return big_case(ctx, patches, x, out->as<fin::bfloat16_bits>(), *params); });
  if (ctx.context_lost) return;
  auto* y = out->as<fin::bfloat16_bits>();
  report_timing(ctx, "patch rows [1826128,1176] u8->bf16 (> 2^31, 64-bit)", "contiguous u64", numel, 2.0 * numel,
                [&] { launch_affine(rows_view, x, y, params->w.as<float>(), params->b.as<float>(), Index::kAuto, 0); });
}

void affine_timing(Context& ctx) {
  struct Timed {
    std::string name;
    View view;
    int64_t in_offset;
    int in_bytes, out_bytes;  // 1 u8, 4 f32; 2 bf16, 4 f32
  };
  const int64_t C = 3, H = 728, W = 1288, P = 14, m = 2, T = 2, F = 32;
  const std::vector<Timed> cases = {
      {"qwen2vl 70000 patches u8->bf16", contiguous_view({70000, 3, 392}, 1), 0, 1, 2},
      {"qwen2vl 70000 patches f32->bf16", contiguous_view({70000, 3, 392}, 1), 0, 4, 2},
      {"patches[1:] of 70000 (8-byte aligned) u8->bf16", contiguous_view({69999, 3, 392}, 1), 1176, 1, 2},
      {"patches misaligned by 1 byte (VEC 1) u8->bf16", contiguous_view({70000, 3, 392}, 1), 1, 1, 2},
      {"NCHW 32x3x448x448 u8->f32", contiguous_view({32, 3, 448, 448}, 1), 0, 1, 4},
      {"NHWC 32x448x448x3 u8->bf16", contiguous_view({32, 448, 448, 3}, 3), 0, 1, 2},
      {"HWC->CHW 32x448x448x3 u8->bf16", {{32, 3, 448, 448}, {448 * 448 * 3, 1, 448 * 3, 3}, 1}, 0, 1, 2},
      {"HWC->CHW 32x448x448x3 u8->f32", {{32, 3, 448, 448}, {448 * 448 * 3, 1, 448 * 3, 3}, 1}, 0, 1, 4},
      {"patchify video 32x3x728x1288 u8->bf16",
       {{F / T, H / (P * m), W / (P * m), m, m, C, T, P, P},
        {T * C * H * W, P * m * W, P * m, P * W, P, H * W, C * H * W, W, 1},
        5},
       0,
       1,
       2},
      {"patchify one 3x840x1148 image (T=2) u8->bf16",
       {{1, 840 / 28, 1148 / 28, m, m, C, T, P, P},
        {C * 840 * 1148, 28 * 1148, 28, P * 1148, P, 840 * 1148, 0, 1148, 1},
        5},
       0,
       1,
       2},
  };
  std::unique_ptr<Params> params;
  ctx.run("timing", "parameters", [&]() -> Outcome {
    params = std::make_unique<Params>();
    return {true, ""};
  });
  if (!params) return;
  for (const Timed& t : cases) {
    if (ctx.context_lost) return;
    const int64_t span = t.view.span() + t.in_offset, numel = t.view.numel();
    std::unique_ptr<DeviceBuffer> in, out;
    std::string kernel;
    std::function<void()> launch;
    ctx.run("timing", "prepare " + t.name, [&]() -> Outcome {
      in = std::make_unique<DeviceBuffer>(span * t.in_bytes);
      out = std::make_unique<DeviceBuffer>(numel * t.out_bytes);
      const float *w = params->w.as<float>(), *b = params->b.as<float>();
      if (t.in_bytes == 1) {
        fill(in->as<uint8_t>(), span);
      } else {
        fill(in->as<float>(), span);
      }
      launch = [&, w, b] {
        if (t.in_bytes == 1 && t.out_bytes == 2) {
          kernel = launch_affine(t.view, in->as<uint8_t>() + t.in_offset, out->as<fin::bfloat16_bits>(), w, b,
                                 Index::kAuto, ctx.device);
        } else if (t.in_bytes == 1) {
          kernel =
              launch_affine(t.view, in->as<uint8_t>() + t.in_offset, out->as<float>(), w, b, Index::kAuto, ctx.device);
        } else {
          kernel = launch_affine(t.view, in->as<float>() + t.in_offset, out->as<fin::bfloat16_bits>(), w, b,
                                 Index::kAuto, ctx.device);
        }
      };
      launch();
      return {true, kernel};
    });
    if (!in || !out || kernel.empty()) continue;
    // Bytes the kernel must move: an expanded (stride-0) frame is read once.
    const double read = static_cast<double>(t.view.span()) * t.in_bytes,
                 written = static_cast<double>(numel) * t.out_bytes;
    report_timing(ctx, t.name, kernel, read, written, launch);
  }
}

}  // namespace gpu_check
