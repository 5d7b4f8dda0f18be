// Runs the GPU kernels' per-thread code from affine_kernel.h on the host, one emulated thread after
// another over a small grid, and checks every output element bit for bit against the scalar formula.
// This tests the vector indexing (ChannelCursor), the grid-stride loop, the tail split, in-place
// operation and both index widths without a GPU. Needs only a C++17 compiler:
//   g++ -std=c++17 -O1 -Icsrc tests/cpp/kernel_emulation.cpp -o emulation && ./emulation
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "affine_kernel.h"

namespace fin = fused_input_norm;

namespace {

int passed = 0;
int failed = 0;
std::mt19937 rng(1234);

template <typename T>
T random_value() {
  if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>) {
    return static_cast<T>(rng());
  } else {
    return fin::from_float<T>(std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng));
  }
}

// 16-byte aligned storage for n elements of T (the contiguous kernel's requirement).
template <typename T>
T* aligned(std::vector<fin::pack16_t>& storage, size_t n) {
  storage.assign(n * sizeof(T) / sizeof(fin::pack16_t) + 1, fin::pack16_t{});
  return reinterpret_cast<T*>(storage.data());
}

template <typename in_t, typename out_t, typename index_t>
void check_contiguous(const char* types, size_t numel, size_t inner, size_t channels, size_t threads, bool in_place) {
  std::vector<fin::pack16_t> in_storage, out_storage;
  in_t* in = aligned<in_t>(in_storage, numel);
  for (size_t i = 0; i < numel; ++i) in[i] = random_value<in_t>();
  std::vector<float> weight(channels), bias(channels);
  for (size_t c = 0; c < channels; ++c) {
    weight[c] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    bias[c] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  }
  std::vector<out_t> expected(numel);
  for (size_t i = 0; i < numel; ++i) {
    const size_t c = (i / inner) % channels;
    expected[i] = fin::from_float<out_t>(fin::affine(fin::to_float(in[i]), weight[c], bias[c]));
  }
  out_t* out;
  if constexpr (std::is_same_v<in_t, out_t>) {
    out = in_place ? in : aligned<out_t>(out_storage, numel);
  } else {
    out = aligned<out_t>(out_storage, numel);
  }
  if (out != reinterpret_cast<out_t*>(in)) std::memset(out, 0xFF, numel * sizeof(out_t));  // poison

  for (size_t t = 0; t < threads; ++t) {
    fin::affine_contiguous_thread<in_t, out_t, index_t>(in, out, weight.data(), bias.data(), numel, inner, channels, t,
                                                        threads);
  }
  size_t bad = 0;
  for (size_t i = 0; i < numel; ++i) bad += std::memcmp(&out[i], &expected[i], sizeof(out_t)) != 0;
  if (bad == 0) {
    ++passed;
  } else {
    ++failed;
    std::printf("FAIL %s index%zu numel=%zu inner=%zu channels=%zu threads=%zu in_place=%d: %zu wrong\n", types,
                8 * sizeof(index_t), numel, inner, channels, threads, in_place, bad);
  }
}

template <typename in_t, typename out_t>
void check_pair(const char* types) {
  for (size_t numel : {1, 15, 16, 17, 33, 392, 1000, 4099}) {
    for (size_t inner : {1, 3, 7, 16, 196, 1000}) {
      for (size_t channels : {1, 3, 4}) {
        for (size_t threads : {1, 5, 64}) {
          check_contiguous<in_t, out_t, uint32_t>(types, numel, inner, channels, threads, false);
          check_contiguous<in_t, out_t, uint64_t>(types, numel, inner, channels, threads, false);
          if constexpr (std::is_same_v<in_t, out_t>) {
            check_contiguous<in_t, out_t, uint32_t>(types, numel, inner, channels, threads, true);
          }
        }
      }
    }
  }
}

// The strided kernel's thread loop on a permuted [2, 3, 5] input (channels on dim 1) with 7 threads.
void check_strided() {
  const int64_t sizes[3] = {2, 3, 5};
  std::vector<uint8_t> in(30);
  for (auto& v : in) v = static_cast<uint8_t>(rng());
  fin::StridedLayout layout{3, 1, {2, 3, 5}, {1, 10, 2}};  // element (a, c, k) at a + 10 c + 2 k
  const float weight[3] = {0.5f, -1.0f, 2.0f};
  const float bias[3] = {1.0f, 0.25f, -3.0f};
  std::vector<float> out(30, -1.0f);
  for (int64_t t = 0; t < 7; ++t)
    fin::affine_strided_thread<uint8_t, float>(in.data(), out.data(), weight, bias, 30, layout, t, 7);
  size_t bad = 0;
  for (int64_t a = 0; a < sizes[0]; ++a)
    for (int64_t c = 0; c < sizes[1]; ++c)
      for (int64_t k = 0; k < sizes[2]; ++k) {
        const float x = in[a + 10 * c + 2 * k];
        bad += out[(a * 3 + c) * 5 + k] != x * weight[c] + bias[c];
      }
  (bad == 0 ? passed : failed)++;
  if (bad) std::printf("FAIL strided: %zu wrong\n", bad);
}

}  // namespace

int main() {
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
  check_strided();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
