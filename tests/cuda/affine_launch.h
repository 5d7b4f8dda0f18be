// The affine's kernel choice for a view, as the extension's glue makes it (csrc/affine.cpp plan_affine,
// csrc/affine_cuda.cu launch_affine / fits_32_bit), without torch: contiguous -> the contiguous kernel at the
// widest vector both pointers allow (NHWC with 2-4 channels: the interleaved channels-last kernel);
// channels-last read channels-first -> the planar channels-last kernel when aligned and whole vectors of
// pixels; anything else -> the strided kernel. Keep in step with affine_cuda.cu.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "affine_kernel.h"
#include "cuda_launch.h"

namespace gpu_check {

namespace fin = fused_input_norm;

struct View {
  std::vector<int64_t> sizes, strides;  // in input elements
  int channel_dim;
  int64_t numel() const {
    int64_t n = 1;
    for (const int64_t s : sizes) n *= s;
    return n;
  }
  int64_t span() const {  // input elements the view reaches, + 1
    int64_t last = 0;
    for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
    return last + 1;
  }
};

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    s[d] = stride;
    stride *= sizes[d];
  }
  return s;
}

inline View contiguous_view(const std::vector<int64_t>& sizes, int channel_dim) {
  return {sizes, contiguous_strides(sizes), channel_dim};
}

enum class Index { kAuto, k32, k64 };

template <typename in_t, typename out_t, int V = fin::kElemsPerVector<in_t, out_t>, typename Body>
void with_widest_vector(const in_t* in, const out_t* out, Body&& body) {
  if constexpr (V == 1) {
    body(std::integral_constant<int, 1>{});
  } else {
    if (fin::vectors_fit<in_t, out_t, V>(in, out)) return body(std::integral_constant<int, V>{});
    with_widest_vector<in_t, out_t, V / 2>(in, out, body);
  }
}

inline bool is_contiguous(const View& v) {
  int64_t expected = 1;
  for (size_t d = v.sizes.size(); d-- > 0;) {
    if (v.sizes[d] != 1 && v.strides[d] != expected) return false;
    expected *= v.sizes[d];
  }
  return true;
}

// Launches the kernel the glue would launch for `view` of `in` (index width forced or chosen as the glue
// does) on the default stream; returns what ran, e.g. "contiguous VEC=16 u32".
template <typename in_t, typename out_t>
std::string launch_affine(const View& view, const in_t* in, out_t* out, const float* w, const float* b, Index index,
                          int device) {
  constexpr int kVec = fin::kElemsPerVector<in_t, out_t>;
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  const int64_t numel = view.numel();
  const int cd = view.channel_dim;
  const bool contiguous = is_contiguous(view);
  int64_t inner = 1;
  for (size_t d = cd + 1; d < view.sizes.size(); ++d) inner *= view.sizes[d];
  fin::StridedLayout layout{};
  fin::ChannelsLastShape pixels{};
  bool channels_last = false;
  if (!contiguous) {
    if (!fin::build_strided_layout(static_cast<int>(view.sizes.size()), view.sizes.data(), view.strides.data(), cd,
                                   &layout)) {
      throw std::runtime_error("more than kMaxDims dims after merging (the glue copies these)");
    }
    channels_last = fin::as_channels_last(layout, &pixels);
  }
  const bool fits32 = numel <= kMax32 && (contiguous || view.span() - 1 < kMax32);
  const bool wide = index == Index::k64 || (index == Index::kAuto && !fits32);
  if (!wide && !fits32) throw std::runtime_error("32-bit indexing forced on a view past 2^31");
  const bool aligned = reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  std::string ran;
  const auto go = [&](auto index_tag) {
    using index_t = decltype(index_tag);
    const std::string suffix = sizeof(index_t) == 4 ? " u32" : " u64";
    const auto n = static_cast<index_t>(numel);
    const int64_t channels = view.sizes[cd];
    if (channels_last && aligned && pixels.pixels % kVec == 0) {
      ran = "channels-last planar" + suffix;
      return fin::launch<fin::affine_pixels_kernel<in_t, out_t, index_t, true>>(
          numel / (pixels.channels * kVec), device, nullptr, in, out, w, b, n, static_cast<int>(pixels.channels),
          static_cast<index_t>(pixels.pixels));
    }
    if (contiguous) {
      if (aligned && inner == 1 && channels >= 2 && channels <= 4) {
        ran = "channels-last interleaved" + suffix;
        return fin::launch<fin::affine_pixels_kernel<in_t, out_t, index_t, false>>(
            numel / (channels * kVec) + 1, device, nullptr, in, out, w, b, n, static_cast<int>(channels), index_t{0});
      }
      return with_widest_vector(in, out, [&](auto vec) {
        constexpr int V = decltype(vec)::value;
        ran = "contiguous VEC=" + std::to_string(V) + suffix;
        fin::launch<fin::affine_contiguous_kernel<in_t, out_t, index_t, V>>(numel / (2 * V) + 1, device, nullptr, in,
                                                                            out, w, b, n, static_cast<index_t>(inner),
                                                                            static_cast<index_t>(channels));
      });
    }
    ran = "strided" + suffix;
    fin::launch<fin::affine_strided_kernel<in_t, out_t, index_t>>(
        numel / fin::kStridedRun + 1, device, nullptr, in, out, w, b, n, fin::make_offset_calculator<index_t>(layout));
  };
  if (wide) {
    go(uint64_t{});
  } else {
    go(uint32_t{});
  }
  return ran;
}

// The output index -> (input offset, channel) of a view, computed from the view itself (not the merged
// layout the kernel gets): the host reference's walk.
struct ViewWalker {
  const View& v;
  void locate(int64_t i, int64_t* offset, int64_t* channel) const {
    int64_t o = 0, c = 0;
    for (size_t d = v.sizes.size(); d-- > 0;) {
      const int64_t coord = i % v.sizes[d];
      i /= v.sizes[d];
      o += coord * v.strides[d];
      if (static_cast<int>(d) == v.channel_dim) c = coord;
    }
    *offset = o;
    *channel = c;
  }
};

}  // namespace gpu_check
