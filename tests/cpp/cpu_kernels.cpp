// Runs the CPU op's kernels (csrc/affine_cpu_kernels.h) without torch, on every input dtype x output dtype
// and every layout the CPU kernels have: contiguous (long channel runs, short runs as NHWC, a period too
// long to unroll), misaligned, channels-last read channels-first (C = 2, 3, 4), strided (permuted,
// step-sliced), Qwen-VL's 9-D patch view of an image (stride-0 frame), broadcast. Each output element is
// checked against a float64 reference (fp32 math plus one rounding), and bit for bit against the scalar
// rounding of the fp32 result (fused or not), so the hardware float16 conversions (F16C, NEON) and the
// vectorized bfloat16 rounding must give the very bits of the scalar code. It runs the capability the CPU
// would pick, or the one FUSED_INPUT_NORM_CPU_CAPABILITY names (default, avx2, avx512, neon). It also times the kernels
// on one large contiguous and one strided case; scripts/check_aarch64.sh builds it for aarch64 with and without the
// NEON path (FIN_CPU_PLAIN) and runs both under qemu. Needs only a C++20 compiler (and the capability's
// one source, csrc/cpu_capability.cpp):
//   g++ -std=c++20 -O3 -Icsrc tests/cpp/cpu_kernels.cpp csrc/cpu_capability.cpp -o cpu_kernels && ./cpu_kernels
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "affine_cpu_kernels.h"

namespace fin = fused_input_norm;

namespace {

int passed = 0;
int failed = 0;
std::mt19937 rng(1234);

// What the kernels read of affine.h's AffinePlan, planned here as ops.cpp's plan_affine plans it.
struct Plan {
  enum class Kind { kContiguous, kChannelsLast, kStrided };
  Kind kind;
  int64_t numel, channels, inner;
  fin::StridedLayout layout;
  fin::ChannelsLastShape pixels;
};

// torch's parallel_for splits the range into chunks of at least `grain`; here they run one after another,
// last first, so every chunk starts where a real thread would.
const auto serial_chunks = [](int64_t begin, int64_t end, int64_t grain, const auto& f) {
  const int64_t chunk = std::max<int64_t>(grain, (end - begin + 6) / 7);
  for (int64_t b = begin + (end - begin - 1) / chunk * chunk; b >= begin; b -= chunk) f(b, std::min(end, b + chunk));
};

// The input as a view: sizes, element strides and offset into a base buffer, and the channel dim.
struct View {
  std::string name;
  std::vector<int64_t> sizes, strides;
  int64_t offset;
  int channel_dim;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    s[d] = stride;
    stride *= sizes[d];
  }
  return s;
}

View contiguous(std::string name, std::vector<int64_t> sizes, int channel_dim, int64_t offset = 0) {
  auto strides = contiguous_strides(sizes);
  return {std::move(name), std::move(sizes), std::move(strides), offset, channel_dim};
}

// `base` permuted: dims[i] of the result is dim perm[i] of the contiguous base.
View permuted(std::string name, std::vector<int64_t> base, std::vector<int> perm, int channel_dim) {
  const auto base_strides = contiguous_strides(base);
  View v{std::move(name), {}, {}, 0, channel_dim};
  for (int p : perm) {
    v.sizes.push_back(base[p]);
    v.strides.push_back(base_strides[p]);
  }
  return v;
}

std::vector<View> views() {
  std::vector<View> v;
  v.push_back(contiguous("contiguous NCHW (runs of 4900)", {3, 3, 70, 70}, 1));
  v.push_back(contiguous("contiguous patches [P, C, 196]", {300, 3, 196}, 1));
  v.push_back(contiguous("contiguous NHWC (runs of 1)", {2, 70, 70, 3}, 3));
  v.push_back(contiguous("contiguous [8, 40, 60] dim 1 (period 2400 > 2048)", {8, 40, 60}, 1));
  v.push_back(contiguous("contiguous 1-D, one channel", {100003}, 0));
  v.push_back(contiguous("misaligned patches[1:] (offset 1)", {299, 3, 196}, 1, 1));
  v.push_back(contiguous("misaligned NHWC (offset 3)", {1, 50, 61, 4}, 3, 3));
  for (int64_t c : {2, 3, 4}) {  // HWC read as CHW
    v.push_back(permuted("channels-last read channels-first C=" + std::to_string(c), {4, 97, 101, c}, {0, 3, 1, 2}, 1));
  }
  v.push_back(permuted("strided CHW read as HWC", {3, 61, 67}, {1, 2, 0}, 2));
  v.push_back(permuted("strided permuted 4-D", {5, 3, 33, 41}, {2, 1, 3, 0}, 1));
  View sliced = contiguous("strided step-sliced [:, :, ::3]", {4, 3, 50, 29}, 1);
  sliced.strides = contiguous_strides({4, 3, 50, 87});
  sliced.strides[3] = 3;
  v.push_back(sliced);
  // Qwen2-VL's patch view of one image [3, 56, 84] (P=14, T=2, merge 2): the frame repeated with stride 0.
  {
    const int64_t C = 3, H = 56, W = 84, P = 14, T = 2, m = 2, gh = H / (P * m), gw = W / (P * m);
    const std::vector<int64_t> sizes9{1, T, C, gh, m, P, gw, m, P};
    const std::vector<int64_t> strides9{0, 0, H * W, m * P * W, P * W, W, m * P, P, 1};
    View patch{"patch view (9-D, stride-0 frame)", {}, {}, 0, 5};
    for (int p : {0, 3, 6, 4, 7, 2, 1, 5, 8}) {
      patch.sizes.push_back(sizes9[p]);
      patch.strides.push_back(strides9[p]);
    }
    v.push_back(patch);
  }
  View broadcast = contiguous("broadcast one image to 6", {6, 3, 40, 40}, 1);
  broadcast.strides[0] = 0;
  v.push_back(broadcast);
  return v;
}

bool is_contiguous(const View& v) { return v.strides == contiguous_strides(v.sizes); }

Plan plan_for(const View& v) {
  Plan plan{};
  const int nd = static_cast<int>(v.sizes.size());
  plan.numel = 1;
  for (int64_t s : v.sizes) plan.numel *= s;
  plan.channels = v.sizes[v.channel_dim];
  if (!is_contiguous(v)) {
    if (!fin::build_strided_layout(nd, v.sizes.data(), v.strides.data(), v.channel_dim, &plan.layout)) std::abort();
    plan.kind = fin::as_channels_last(plan.layout, &plan.pixels) ? Plan::Kind::kChannelsLast : Plan::Kind::kStrided;
    return plan;
  }
  plan.kind = Plan::Kind::kContiguous;
  plan.inner = 1;
  for (int d = v.channel_dim + 1; d < nd; ++d) plan.inner *= v.sizes[d];
  if (plan.channels == 1) plan.inner = plan.numel;
  return plan;
}

// Independent decoding of the output to double.
double to_double(float y) { return y; }
double to_double(fin::bfloat16_bits y) {
  const uint32_t u = static_cast<uint32_t>(y.x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double to_double(fin::half_bits y) {
  const int sign = y.x >> 15, exponent = (y.x >> 10) & 31, mantissa = y.x & 1023;
  const double magnitude = exponent == 31  ? (mantissa ? NAN : INFINITY)
                           : exponent == 0 ? std::ldexp(mantissa, -24)
                                           : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

template <typename T>
constexpr double kUlpAtOne = std::is_same_v<T, float>                ? 0x1p-23
                             : std::is_same_v<T, fin::bfloat16_bits> ? 0x1p-7
                                                                     : 0x1p-10;
template <typename T>
constexpr double kMaxFinite = std::is_same_v<T, float>                ? 3.4e38
                              : std::is_same_v<T, fin::bfloat16_bits> ? 3.38e38
                                                                      : 65504.0;

template <typename T>
bool same_bits(T a, T b) {
  if (std::isnan(to_double(a)) && std::isnan(to_double(b))) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename in_t>
in_t random_input(int64_t i) {
  if constexpr (std::is_same_v<in_t, uint8_t> || std::is_same_v<in_t, uint16_t>) {
    return static_cast<in_t>(rng());
  } else {
    // Mostly pixels-like values; a few specials: NaN, +-Inf, float16 overflow, tiny values.
    static const float specials[] = {NAN, INFINITY, -INFINITY, 70000.0f, -1e-6f, 3e-8f, 0.0f, -0.0f};
    if (i % 997 == 13) return fin::from_float<in_t>(specials[(i / 997) % 8]);
    return fin::from_float<in_t>(std::normal_distribution<float>(0.0f, 3.0f)(rng));
  }
}

template <typename in_t, typename out_t>
void check_view(const View& v, const char* types) {
  const Plan plan = plan_for(v);
  int64_t extent = v.offset + 1;
  for (size_t d = 0; d < v.sizes.size(); ++d) extent += (v.sizes[d] - 1) * v.strides[d];
  std::vector<in_t> base(extent);
  for (int64_t i = 0; i < extent; ++i) base[i] = random_input<in_t>(i);
  std::vector<float> weight(plan.channels), bias(plan.channels);
  for (int64_t c = 0; c < plan.channels; ++c) {
    weight[c] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    bias[c] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  }
  std::vector<out_t> out(plan.numel + 1);  // +1: a misaligned output too when the input is misaligned
  out_t* y = out.data() + (v.offset & 1);
  std::memset(static_cast<void*>(out.data()), 0xA5, out.size() * sizeof(out_t));  // poison
  fin::affine_cpu_kernel(base.data() + v.offset, y, weight.data(), bias.data(), plan, serial_chunks);

  // Walk the view in output order.
  const int nd = static_cast<int>(v.sizes.size());
  std::vector<int64_t> coord(nd, 0);
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < plan.numel; ++i) {
    int64_t offset = v.offset;
    for (int d = 0; d < nd; ++d) offset += coord[d] * v.strides[d];
    const int64_t c = coord[v.channel_dim];
    const float xf = fin::to_float(base[offset]);
    const double exact = static_cast<double>(xf) * weight[c] + bias[c];  // float64 reference
    const double got = to_double(y[i]);
    bool ok;
    if (!std::isfinite(exact) || std::abs(exact) > kMaxFinite<out_t> * 0.999) {
      ok = std::isnan(exact) ? std::isnan(got) : !std::isfinite(got) || std::abs(got) >= kMaxFinite<out_t> * 0.99;
    } else {
      const double magnitude = std::abs(static_cast<double>(xf) * weight[c]) + std::abs(bias[c]);
      const double tol = kUlpAtOne<out_t> * std::abs(exact) + 3 * 0x1p-24 * magnitude + 0x1p-24;
      ok = std::abs(got - exact) <= tol;
    }
    // Bit for bit: the scalar rounding of the fp32 result, fused (FMA) or not.
    const out_t fused = fin::from_float<out_t>(std::fma(xf, weight[c], bias[c]));
    volatile float product = xf * weight[c];
    const out_t unfused = fin::from_float<out_t>(product + bias[c]);
    ok = ok && (same_bits(y[i], fused) || same_bits(y[i], unfused));
    if (!ok && bad++ == 0) first_bad = i;
    for (int d = nd - 1; d >= 0 && ++coord[d] == v.sizes[d]; --d) coord[d] = 0;
  }
  const bool guard_ok = (v.offset & 1) ? true : std::memcmp(&out[plan.numel], "\xA5\xA5\xA5\xA5", sizeof(out_t)) == 0;
  if (bad || !guard_ok) {
    ++failed;
    std::printf("FAIL %s %s: %lld of %lld elements wrong (first %lld)%s\n", v.name.c_str(), types,
                static_cast<long long>(bad), static_cast<long long>(plan.numel), static_cast<long long>(first_bad),
                guard_ok ? "" : ", wrote past the end");
  } else {
    ++passed;
  }
}

// floats_to_half of the capability (F16C, NEON or scalar) against the scalar rounding, bit for bit, on every float16
// rounding boundary region: each float16 value and the floats just around halfway to the next one.
void check_float16_conversion() {
  std::vector<float> f;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double v = to_double(fin::half_bits{static_cast<uint16_t>(h)});
    const double next = to_double(fin::half_bits{static_cast<uint16_t>((h & 0x7FFF) == 0x7BFF ? h : h + 1)});
    if (std::isnan(v)) continue;
    const float mid = static_cast<float>((v + next) / 2);
    f.insert(f.end(), {static_cast<float>(v), mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
  }
  f.insert(f.end(), {NAN, -NAN, INFINITY, -INFINITY, 65520.0f, 65519.99f, 1e-10f, -1e-10f, 1e38f});
  std::vector<fin::half_bits> hw(f.size()), sw(f.size());
  const auto n = static_cast<int64_t>(f.size());
  fin::with_cpu_capability([&](auto cap) FIN_CPU_KERNEL_LAMBDA {  // the conversion the kernels run
    fin::floats_to_half<decltype(cap)::value>(f.data(), hw.data(), n);
  });
  fin::floats_to_half_scalar(f.data(), sw.data(), static_cast<int64_t>(f.size()));
  int64_t bad = 0;
  for (size_t k = 0; k < f.size(); ++k) bad += !same_bits(hw[k], sw[k]);
  (bad ? failed : passed)++;
  if (bad)
    std::printf("FAIL floats_to_half vs scalar rounding: %lld of %zu differ\n", static_cast<long long>(bad), f.size());
}

template <typename in_t, typename out_t>
void check_all(const char* types) {
  for (const View& v : views()) check_view<in_t, out_t>(v, types);
}

template <typename in_t>
void check_outputs(const char* in_name) {
  check_all<in_t, fin::half_bits>((std::string(in_name) + " -> float16").c_str());
  check_all<in_t, fin::bfloat16_bits>((std::string(in_name) + " -> bfloat16").c_str());
  check_all<in_t, float>((std::string(in_name) + " -> float32").c_str());
}

// Median time of one kernel call, in ms (under qemu: emulated instruction throughput, not speed).
template <typename in_t, typename out_t>
double time_view(const View& v, int reps) {
  const Plan plan = plan_for(v);
  int64_t extent = v.offset + 1;
  for (size_t d = 0; d < v.sizes.size(); ++d) extent += (v.sizes[d] - 1) * v.strides[d];
  std::vector<in_t> base(extent, in_t{});
  std::vector<out_t> out(plan.numel);
  std::vector<float> weight(plan.channels, 0.5f), bias(plan.channels, -1.0f);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fin::affine_cpu_kernel(base.data() + v.offset, out.data(), weight.data(), bias.data(), plan, serial_chunks);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool timing = argc > 1 && std::string(argv[1]) == "--time";
  // The capability the kernels run (FUSED_INPUT_NORM_CPU_CAPABILITY picks a lower one), or the plain build.
#if defined(FIN_CPU_PLAIN)
  const std::string path = "plain C++, not vectorized";
#else
  const std::string path = std::string("capability ") + fin::cpu_capability_name(fin::cpu_capability());
#endif
  if (timing) {
    // u8 -> bf16 and u8 -> fp16 on 2000 contiguous patch rows, and u8 -> bf16 HWC read as CHW.
    const View patches = contiguous("patches", {2000, 3, 392}, 1);
    const View hwc = permuted("hwc", {2, 224, 224, 3}, {0, 3, 1, 2}, 1);
    std::printf("timing (%s): u8->bf16 patches %.3f ms, u8->fp16 patches %.3f ms, u8->bf16 HWC->CHW %.3f ms\n",
                path.c_str(), time_view<uint8_t, fin::bfloat16_bits>(patches, 5),
                time_view<uint8_t, fin::half_bits>(patches, 5), time_view<uint8_t, fin::bfloat16_bits>(hwc, 5));
    return 0;
  }
  std::printf("CPU kernels (%s): every dtype pair x %zu layouts\n", path.c_str(), views().size());
  check_float16_conversion();
  check_outputs<uint8_t>("uint8");
  check_outputs<uint16_t>("uint16");
  check_outputs<fin::half_bits>("float16");
  check_outputs<fin::bfloat16_bits>("bfloat16");
  check_outputs<float>("float32");
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
