// Runs the GPU kernels' per-thread code from affine_kernel.h on the host, one emulated thread after
// another over a small grid, and checks every output element bit for bit against the scalar formula.
// Covers every kernel (contiguous at every vector width, channels-last planar and interleaved, strided),
// every dtype pair, both index widths, tiny grids, in place (contiguous and NHWC, every pair of equal element
// sizes, as affine_out allows) and misaligned pointers, plus the layout building and the magic-number
// divider they rely on. Needs only a C++17 compiler:
//   g++ -std=c++17 -O1 -Icsrc tests/cpp/kernel_emulation.cpp -o emulation && ./emulation
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "affine_kernel.h"

namespace fin = fused_input_norm;

namespace {

int passed = 0;
int failed = 0;
std::mt19937 rng(1234);

void report(bool ok, const char* what, const char* types, size_t detail) {
  (ok ? passed : failed)++;
  if (!ok) std::printf("FAIL %s %s (%zu)\n", what, types, detail);
}

template <typename T>
T random_value() {
  if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>) {
    return static_cast<T>(rng());
  } else {
    return fin::from_float<T>(std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng));
  }
}

// Storage for n elements of T starting `skew` bytes past a 16-byte boundary (a multiple of sizeof(T)).
template <typename T>
struct Buffer {
  std::vector<fin::Chunk<16>::type> storage;
  T* data;
  Buffer(size_t n, size_t skew = 0) : storage((n * sizeof(T) + skew) / 16 + 2) {
    data = reinterpret_cast<T*>(reinterpret_cast<char*>(storage.data()) + skew);
    std::memset(storage.data(), 0xFF, storage.size() * 16);  // poison
  }
};

// A reference written here, sharing nothing with the kernels' numerics.h but the storage structs: float16
// decoded and rounded through double arithmetic (std::ldexp, std::frexp, std::nearbyint in the default
// round-to-nearest-even mode), bfloat16 by a shift and an add, and x * w + b rounded once by libm's fmaf.
// Every expected value the checks use is compared with it (reference_disagreements).
inline float half_to_float_reference(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));  // zero, subnormal
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(sign * INFINITY);
  return static_cast<float>(sign * std::ldexp(1024 + mantissa, exponent - 25));
}

inline uint16_t float_to_half_reference(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7E00 | sign;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return 0x7C00 | sign;  // past the largest float16 (65504) by half an ulp or more: Inf
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));  // subnormal
  int e;
  std::frexp(a, &e);                                 // a = m * 2^e, m in [0.5, 1)
  --e;                                               // a = s * 2^e, s in [1, 2)
  double q = std::nearbyint(std::ldexp(a, 10 - e));  // 1024 .. 2048
  if (q == 2048.0) q = 1024.0, ++e;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(q) - 1024));
}

template <typename T>
float independent_to_float(T v) {
  if constexpr (std::is_same_v<T, fin::half_bits>) {
    return half_to_float_reference(v.x);
  } else if constexpr (std::is_same_v<T, fin::bfloat16_bits>) {
    const uint32_t u = static_cast<uint32_t>(v.x) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  } else {
    return static_cast<float>(v);
  }
}

template <typename T>
T independent_from_float(float f) {
  if constexpr (std::is_same_v<T, fin::half_bits>) {
    return T{float_to_half_reference(f)};
  } else if constexpr (std::is_same_v<T, fin::bfloat16_bits>) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    if (std::isnan(f)) return T{0x7FC0};  // the canonical quiet NaN (c10::BFloat16's)
    u += 0x7FFFu + ((u >> 16) & 1u);      // round to nearest, ties to even (carries into the exponent)
    return T{static_cast<uint16_t>(u >> 16)};
  } else {
    return f;
  }
}

size_t reference_disagreements = 0;

struct Params {
  std::vector<float> weight, bias;
  explicit Params(size_t channels) : weight(channels), bias(channels) {
    for (size_t c = 0; c < channels; ++c) {
      weight[c] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
      bias[c] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    }
  }
  template <typename in_t, typename out_t>
  out_t expected(in_t x, size_t c) const {
    const out_t mine = fin::from_float<out_t>(fin::affine(fin::to_float(x), weight[c], bias[c]));
    const out_t theirs = independent_from_float<out_t>(std::fmaf(independent_to_float(x), weight[c], bias[c]));
    if (std::memcmp(&mine, &theirs, sizeof(out_t)) != 0) ++reference_disagreements;
    return mine;
  }
};

template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// ---- contiguous kernel, every vector width --------------------------------------------------------------
template <typename in_t, typename out_t, int VEC, typename index_t>
void check_contiguous(const char* types, size_t numel, size_t inner, size_t channels, size_t threads, bool in_place) {
  // Skew the pointers to the vector width's alignment and no more (VEC < max: a misaligned slice).
  const size_t in_skew = fin::Vec<in_t, VEC>::kAccess % 16, out_skew = fin::Vec<out_t, VEC>::kAccess % 16;
  Buffer<in_t> in(numel, in_skew);
  for (size_t i = 0; i < numel; ++i) in.data[i] = random_value<in_t>();
  const Params p(channels);
  std::vector<out_t> expected(numel);
  for (size_t i = 0; i < numel; ++i) expected[i] = p.expected<in_t, out_t>(in.data[i], (i / inner) % channels);
  Buffer<out_t> out_buffer(numel, out_skew);
  out_t* out = out_buffer.data;
  if constexpr (sizeof(in_t) == sizeof(out_t)) {  // affine_out allows in place for equal element sizes
    if (in_place) out = reinterpret_cast<out_t*>(in.data);
  }
  if (!fin::vectors_fit<in_t, out_t, VEC>(in.data, out)) return report(false, "contiguous alignment", types, VEC);
  for (size_t t = 0; t < threads; ++t) {
    fin::affine_contiguous_thread<in_t, out_t, VEC, index_t>(in.data, out, p.weight.data(), p.bias.data(), numel, inner,
                                                             channels, t, threads);
  }
  size_t bad = 0;
  for (size_t i = 0; i < numel; ++i) bad += !same_bits(out[i], expected[i]);
  report(bad == 0, "contiguous", types, numel * 1000 + VEC);
}

template <typename in_t, typename out_t, int VEC>
void check_contiguous_width(const char* types) {
  for (size_t numel : {1, 15, 16, 17, 33, 392, 1000, 4099}) {
    for (size_t inner : {1, 3, 7, 16, 196, 1000}) {
      for (size_t channels : {1, 3, 4}) {
        for (size_t threads : {1, 5, 64}) {
          check_contiguous<in_t, out_t, VEC, uint32_t>(types, numel, inner, channels, threads, false);
          check_contiguous<in_t, out_t, VEC, uint64_t>(types, numel, inner, channels, threads, false);
          if constexpr (sizeof(in_t) == sizeof(out_t)) {
            check_contiguous<in_t, out_t, VEC, uint32_t>(types, numel, inner, channels, threads, true);
          }
        }
      }
    }
  }
  if constexpr (VEC > 1) check_contiguous_width<in_t, out_t, VEC / 2>(types);
}

// ---- channels-last kernel: planar (HWC -> CHW) and interleaved (NHWC) -----------------------------------
template <typename in_t, typename out_t, bool planar, typename index_t>
void check_pixels(const char* types, size_t outer, size_t pixels, int channels, size_t threads, bool in_place = false) {
  const size_t numel = outer * pixels * channels;
  Buffer<in_t> in(numel);
  for (size_t i = 0; i < numel; ++i) in.data[i] = random_value<in_t>();
  const std::vector<in_t> input(in.data, in.data + numel);
  const Params p(channels);
  Buffer<out_t> out_buffer(numel);
  out_t* out = out_buffer.data;
  if constexpr (!planar && sizeof(in_t) == sizeof(out_t)) {  // NHWC -> NHWC in place
    if (in_place) out = reinterpret_cast<out_t*>(in.data);
  }
  for (size_t t = 0; t < threads; ++t) {
    fin::affine_pixels_thread<in_t, out_t, planar, index_t>(in.data, out, p.weight.data(), p.bias.data(), numel,
                                                            channels, pixels, t, threads);
  }
  size_t bad = 0;
  for (size_t n = 0; n < outer; ++n) {
    for (size_t m = 0; m < pixels; ++m) {
      for (int c = 0; c < channels; ++c) {
        const size_t src = (n * pixels + m) * channels + c;
        const size_t dst = planar ? (n * channels + c) * pixels + m : src;
        bad += !same_bits(out[dst], p.expected<in_t, out_t>(input[src], c));
      }
    }
  }
  report(bad == 0, planar ? "channels-last planar" : "channels-last interleaved", types, numel);
}

template <typename in_t, typename out_t>
void check_pixels_pair(const char* types) {
  constexpr size_t vec = fin::kElemsPerVector<in_t, out_t>;
  for (int channels : {2, 3, 4}) {
    for (size_t threads : {1, 3, 64}) {
      for (size_t outer : {1, 2, 5}) {
        for (size_t groups : {1, 3, 20}) {  // planar needs whole vectors of pixels per image
          check_pixels<in_t, out_t, true, uint32_t>(types, outer, groups * vec, channels, threads);
          check_pixels<in_t, out_t, true, uint64_t>(types, outer, groups * vec, channels, threads);
        }
        for (size_t pixels : {size_t{1}, size_t{7}, vec, 3 * vec + 5, size_t{100}}) {
          check_pixels<in_t, out_t, false, uint32_t>(types, outer, pixels, channels, threads);
          check_pixels<in_t, out_t, false, uint64_t>(types, outer, pixels, channels, threads);
          if constexpr (sizeof(in_t) == sizeof(out_t)) {
            check_pixels<in_t, out_t, false, uint32_t>(types, outer, pixels, channels, threads, true);
          }
        }
      }
    }
  }
}

// ---- strided kernel -----------------------------------------------------------------------------------
// A random view: a permutation of a random contiguous shape, some dims step-sliced or expanded (stride 0),
// the channel dim anywhere. The expected output is computed from the view's own sizes/strides, not from
// the merged layout the kernel gets.
struct View {
  std::vector<int64_t> sizes, strides;
  int64_t storage;  // elements the view reaches, + 1
  int channel_dim;
};

View random_view(int ndim, int64_t max_numel) {
  View v;
  std::vector<int64_t> base(ndim);
  std::vector<int64_t> step(ndim, 1);
  int64_t numel;
  do {
    numel = 1;
    for (int d = 0; d < ndim; ++d) {
      base[d] = 1 + rng() % 5;
      step[d] = rng() % 4 == 0 ? 2 : 1;
      numel *= base[d];
    }
  } while (numel > max_numel);
  std::vector<int64_t> contiguous(ndim);
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    contiguous[d] = s;
    s *= base[d] * step[d];
  }
  v.storage = s;
  std::vector<int> perm(ndim);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int d : perm) {
    v.sizes.push_back(base[d]);
    v.strides.push_back(rng() % 6 == 0 ? 0 : contiguous[d] * step[d]);  // stride 0: an expanded dim
  }
  v.channel_dim = static_cast<int>(rng() % ndim);
  return v;
}

template <typename in_t, typename out_t, typename index_t>
void check_strided_view(const char* types, const View& v, size_t threads, bool skew_out) {
  const int ndim = static_cast<int>(v.sizes.size());
  fin::StridedLayout layout;
  if (!fin::build_strided_layout(ndim, v.sizes.data(), v.strides.data(), v.channel_dim, &layout)) {
    return report(false, "build_strided_layout", types, ndim);
  }
  int64_t numel = 1;
  for (int64_t n : v.sizes) numel *= n;
  Buffer<in_t> in(v.storage);
  for (int64_t i = 0; i < v.storage; ++i) in.data[i] = random_value<in_t>();
  const Params p(v.sizes[v.channel_dim]);
  Buffer<out_t> out(numel, skew_out ? sizeof(out_t) : 0);  // skewed: the per-element store path
  const auto calc = fin::make_offset_calculator<index_t>(layout);
  for (size_t t = 0; t < threads; ++t) {
    fin::affine_strided_thread<in_t, out_t, index_t>(in.data, out.data, p.weight.data(), p.bias.data(), numel, calc, t,
                                                     threads);
  }
  size_t bad = 0;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rest = i, offset = 0, channel = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t coord = rest % v.sizes[d];
      rest /= v.sizes[d];
      offset += coord * v.strides[d];
      if (d == v.channel_dim) channel = coord;
    }
    bad += !same_bits(out.data[i], p.expected<in_t, out_t>(in.data[offset], channel));
  }
  report(bad == 0, "strided", types, static_cast<size_t>(numel));
}

template <typename in_t, typename out_t>
void check_strided_pair(const char* types) {
  for (int k = 0; k < 24; ++k) {
    const View v = random_view(1 + k % 6, 3000);
    const size_t threads = k % 3 == 0 ? 1 : k % 3 == 1 ? 7 : 64;
    check_strided_view<in_t, out_t, uint32_t>(types, v, threads, k % 2 == 0);
    check_strided_view<in_t, out_t, uint64_t>(types, v, threads, k % 2 == 1);
  }
}

// ---- index math --------------------------------------------------------------------------------------
void check_divider() {
  size_t bad = 0, cases = 0;
  std::vector<uint32_t> divisors = {1, 2, 3, 7, 14, 196, 1176, 65535, 65536, 65537, (1u << 31) - 1, 1u << 30};
  for (int k = 0; k < 200; ++k) divisors.push_back(1 + rng() % ((1u << 31) - 1));
  for (uint32_t d : divisors) {
    const auto div = fin::make_divider<uint32_t>(d);
    std::vector<uint32_t> numerators = {0, 1, d - 1, d, (1u << 31) - 1, (1u << 31) - 2};
    if (d < (1u << 30)) numerators.push_back(2 * d + 1);
    for (int k = 0; k < 200; ++k) numerators.push_back(rng() % (1u << 31));
    for (uint32_t n : numerators) {
      if (n >= (1u << 31)) continue;
      ++cases;
      bad += div.div(n) != n / d;
    }
  }
  report(bad == 0, "IntDivider<uint32_t>", "", cases);
}

void check_layouts() {
  // HWC viewed CHW: [N, C, H, W] with channels-last strides merges to [HW, C, N] and is recognized.
  const int64_t sizes[4] = {2, 3, 5, 7}, strides[4] = {105, 1, 21, 3};
  fin::StridedLayout l;
  fin::ChannelsLastShape shape{};
  bool ok = fin::build_strided_layout(4, sizes, strides, 1, &l) && l.ndim == 3 && l.sizes[0] == 35 &&
            l.strides[0] == 3 && l.channel_dim == 1 && fin::as_channels_last(l, &shape) && shape.outer == 2 &&
            shape.channels == 3 && shape.pixels == 35;
  report(ok, "layout: channels-last recognized", "", 0);
  // A permuted NCHW (NHWC view of a CHW tensor) is not channels-last input.
  const int64_t nhwc_sizes[4] = {2, 5, 7, 3}, nhwc_strides[4] = {105, 7, 1, 35};
  ok = fin::build_strided_layout(4, nhwc_sizes, nhwc_strides, 3, &l) && !fin::as_channels_last(l, &shape);
  report(ok, "layout: channels-first input not channels-last", "", 0);
  // Size-1 dims vanish; the channel dim of size 1 becomes -1; contiguous neighbours merge.
  const int64_t ones[5] = {1, 4, 1, 6, 1}, ones_strides[5] = {99, 6, 99, 1, 99};
  ok =
      fin::build_strided_layout(5, ones, ones_strides, 0, &l) && l.ndim == 1 && l.sizes[0] == 24 && l.channel_dim == -1;
  report(ok, "layout: size-1 dims dropped, neighbours merged", "", 0);
  // More than kMaxDims dims that cannot merge: refused (the glue copies).
  std::vector<int64_t> many(fin::kMaxDims + 1, 2), many_strides(fin::kMaxDims + 1);
  for (int d = 0; d <= fin::kMaxDims; ++d) many_strides[d] = int64_t{1} << (2 * (fin::kMaxDims - d));
  ok = !fin::build_strided_layout(fin::kMaxDims + 1, many.data(), many_strides.data(), 0, &l);
  report(ok, "layout: too many dims refused", "", 0);
}

template <typename in_t, typename out_t>
void check_pair(const char* types) {
  check_contiguous_width<in_t, out_t, fin::kElemsPerVector<in_t, out_t>>(types);
  check_pixels_pair<in_t, out_t>(types);
  check_strided_pair<in_t, out_t>(types);
}

}  // namespace

// The host's affine() is the GPU's fmaf bit for bit: one rounding of the exact x * w + b. This file is built
// for the baseline x86-64 ISA (no FMA instruction), where affine() is the exact emulation and a plain
// `x * w + b` would round twice; std::fmaf (libm) is the correctly rounded reference. Random bit patterns
// (subnormals, overflow, Inf/NaN included), pixel-like uint8 x, and sums that cancel or absorb.
void check_affine_is_one_rounding() {
  std::mt19937 gen(18);
  const auto any_float = [&] {
    const uint32_t u = gen();
    return fin::bits_as_float(u);
  };
  size_t bad = 0, differ_from_two_roundings = 0;
  constexpr size_t kCases = 2000000;
  for (size_t i = 0; i < kCases; ++i) {
    float x = any_float(), w = any_float(), b = any_float();
    if (i % 3 == 1) {
      x = static_cast<float>(gen() & 255);
      w = std::ldexp(static_cast<float>(gen() % (1u << 24)) / (1u << 24) + 0.5f, -static_cast<int>(gen() % 12));
      b = std::ldexp(static_cast<float>(gen() % (1u << 24)) / (1u << 24) - 0.5f, 2 - static_cast<int>(gen() % 8));
    } else if (i % 3 == 2) {
      b = -x * w * (1.0f + std::ldexp(static_cast<float>(static_cast<int>(gen() % 64) - 32), -23));
    }
    const float got = fin::affine(x, w, b), want = std::fmaf(x, w, b);
    volatile float product = x * w;  // volatile: no contraction, the two-rounding result for comparison
    const float two_roundings = product + b;
    if (std::isnan(want) ? !std::isnan(got) : fin::float_as_bits(got) != fin::float_as_bits(want)) ++bad;
    if (!std::isnan(want) && fin::float_as_bits(two_roundings) != fin::float_as_bits(want)) ++differ_from_two_roundings;
  }
  report(bad == 0, "affine one rounding", "float", bad);
  // The cases must include ones a multiply then an add gets wrong, or the check proves nothing.
  report(differ_from_two_roundings > 1000, "affine cases that round twice", "float", differ_from_two_roundings);
}

int main() {
  check_affine_is_one_rounding();
  check_divider();
  check_layouts();
  check_pair<uint8_t, fin::half_bits>("uint8->float16");
  check_pair<uint8_t, fin::bfloat16_bits>("uint8->bfloat16");
  check_pair<uint8_t, float>("uint8->float32");
  check_pair<uint16_t, fin::half_bits>("uint16->float16");
  check_pair<uint16_t, fin::bfloat16_bits>("uint16->bfloat16");
  check_pair<uint16_t, float>("uint16->float32");
  check_pair<fin::half_bits, fin::half_bits>("float16->float16");
  check_pair<fin::half_bits, fin::bfloat16_bits>("float16->bfloat16");
  check_pair<fin::half_bits, float>("float16->float32");
  check_pair<fin::bfloat16_bits, fin::half_bits>("bfloat16->float16");
  check_pair<fin::bfloat16_bits, fin::bfloat16_bits>("bfloat16->bfloat16");
  check_pair<fin::bfloat16_bits, float>("bfloat16->float32");
  check_pair<float, fin::half_bits>("float32->float16");
  check_pair<float, fin::bfloat16_bits>("float32->bfloat16");
  check_pair<float, float>("float32->float32");
  // Every expected value above, against the reference that shares no conversion or rounding code.
  report(reference_disagreements == 0, "numerics.h agrees with the independent reference", "all",
         reference_disagreements);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
