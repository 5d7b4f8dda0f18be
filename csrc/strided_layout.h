// The one index scheme of both backends for strided layouts (the output's order mapped to the input's
// offsets), and the magic-number divider the GPU walks it with, as PyTorch's OffsetCalculator/IntDivider.
#pragma once

#include "numerics.h"

namespace fused_input_norm {

// The output is always row-major (contiguous, input's shape). A StridedLayout describes where the input's
// elements are, in the output's order: dims innermost first, size-1 dims dropped, and neighbours merged
// where the outer one steps exactly over the inner one (never across the channel dim). The glue builds it
// once per call; the CPU walks it with a counter, the GPU maps indices through an OffsetCalculator.
constexpr int kMaxDims = 10;

struct StridedLayout {
  int ndim;         // >= 1
  int channel_dim;  // in sizes/strides (innermost = 0); -1 when the channel dim has size 1
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];  // in input elements; 0 for broadcast (expanded) dims
};

// Host only. Returns false when more than kMaxDims dims survive merging (the glue then copies).
inline bool build_strided_layout(int ndim, const int64_t* sizes, const int64_t* strides, int channel_dim,
                                 StridedLayout* layout) {
  StridedLayout l{};
  l.channel_dim = -1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    const bool is_channel = d == channel_dim;
    const int n = l.ndim;
    if (n > 0 && !is_channel && l.channel_dim != n - 1 && strides[d] == l.sizes[n - 1] * l.strides[n - 1]) {
      l.sizes[n - 1] *= sizes[d];
      continue;
    }
    if (n == kMaxDims) return false;
    l.sizes[n] = sizes[d];
    l.strides[n] = strides[d];
    if (is_channel) l.channel_dim = n;
    l.ndim = n + 1;
  }
  if (l.ndim == 0) {  // a single element
    l.ndim = 1;
    l.sizes[0] = 1;
    l.strides[0] = 1;
  }
  *layout = l;
  return true;
}

// Channels-last input read channels-first (HWC -> CHW, NHWC -> NCHW): the input is contiguous
// [outer, pixels, channels] and the output [outer, channels, pixels]. Host only.
struct ChannelsLastShape {
  int64_t outer, channels, pixels;
};

inline bool as_channels_last(const StridedLayout& l, ChannelsLastShape* shape) {
  if (l.ndim < 2 || l.ndim > 3 || l.channel_dim != 1) return false;
  const int64_t c = l.sizes[1], m = l.sizes[0];
  if (c < 2 || c > 4 || l.strides[1] != 1 || l.strides[0] != c) return false;
  if (l.ndim == 3 && l.strides[2] != c * m) return false;
  *shape = {l.ndim == 3 ? l.sizes[2] : 1, c, m};
  return true;
}

// n / d with a precomputed magic number (as PyTorch's IntDivider): valid for n, d < 2^31, which the glue
// guarantees before choosing 32-bit indexing. The 64-bit form divides.
template <typename index_t>
struct IntDivider {
  index_t divisor;
  FIN_HOST_DEVICE index_t div(index_t n) const { return n / divisor; }
};

template <>
struct IntDivider<uint32_t> {
  uint32_t divisor, magic, shift;
  FIN_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(FIN_DEVICE_PASS)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
};

template <typename index_t>
inline IntDivider<index_t> make_divider(index_t d) {  // host only; d >= 1
  IntDivider<index_t> r{};
  r.divisor = d;
  if constexpr (std::is_same_v<index_t, uint32_t>) {
    while (r.shift < 32 && (uint64_t{1} << r.shift) < d) ++r.shift;
    r.magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << r.shift) - d)) / d + 1);
  }
  return r;
}

// Maps the output's linear index to the input's element offset and channel: one magic-number division
// per dim in 32-bit indexing.
template <typename index_t>
struct OffsetCalculator {
  struct Position {
    index_t offset;   // input element offset
    index_t channel;  // weight/bias index
    index_t inner;    // coordinate along dim 0 (to step along it without dividing)
  };

  int ndim;
  int channel_dim;
  IntDivider<index_t> sizes[kMaxDims];
  index_t strides[kMaxDims];

  FIN_HOST_DEVICE Position locate(index_t linear) const {
    Position p{0, 0, 0};
#if defined(FIN_GPU_COMPILER)
#pragma unroll
#endif
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const index_t q = sizes[d].div(linear);
      const index_t coord = linear - q * sizes[d].divisor;
      p.offset += coord * strides[d];
      if (d == channel_dim) p.channel = coord;
      if (d == 0) p.inner = coord;
      linear = q;
    }
    return p;
  }
};

template <typename index_t>
inline OffsetCalculator<index_t> make_offset_calculator(const StridedLayout& l) {  // host only
  OffsetCalculator<index_t> calc{};
  calc.ndim = l.ndim;
  calc.channel_dim = l.channel_dim;
  for (int d = 0; d < l.ndim; ++d) {
    calc.sizes[d] = make_divider(static_cast<index_t>(l.sizes[d]));
    calc.strides[d] = static_cast<index_t>(l.strides[d]);
  }
  return calc;
}

}  // namespace fused_input_norm
