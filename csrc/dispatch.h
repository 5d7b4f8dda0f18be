// The one place that maps (input dtype, output dtype) to kernel types.
#pragma once

#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "numerics.h"

namespace fused_input_norm {

// torch's Half/BFloat16 are a bare uint16_t; the torch-free kernels take these layout-identical structs.
template <torch::headeronly::ScalarType>
struct KernelType;
template <>
struct KernelType<torch::headeronly::ScalarType::Byte> {
  using type = uint8_t;
};
template <>
struct KernelType<torch::headeronly::ScalarType::UInt16> {
  using type = uint16_t;
};
template <>
struct KernelType<torch::headeronly::ScalarType::Half> {
  using type = half_bits;
};
template <>
struct KernelType<torch::headeronly::ScalarType::BFloat16> {
  using type = bfloat16_bits;
};
template <>
struct KernelType<torch::headeronly::ScalarType::Float> {
  using type = float;
};

#define FIN_OUT_CASE(IN, OUT, ...)                                                          \
  case torch::headeronly::ScalarType::OUT: {                                                \
    using in_t = ::fused_input_norm::KernelType<torch::headeronly::ScalarType::IN>::type;   \
    using out_t = ::fused_input_norm::KernelType<torch::headeronly::ScalarType::OUT>::type; \
    __VA_ARGS__();                                                                          \
    break;                                                                                  \
  }

#define FIN_IN_CASE(IN, OUT_DTYPE, ...)                                                   \
  case torch::headeronly::ScalarType::IN:                                                 \
    switch (OUT_DTYPE) {                                                                  \
      FIN_OUT_CASE(IN, Half, __VA_ARGS__)                                                 \
      FIN_OUT_CASE(IN, BFloat16, __VA_ARGS__)                                             \
      FIN_OUT_CASE(IN, Float, __VA_ARGS__)                                                \
      default:                                                                            \
        STD_TORCH_CHECK(false, "fused_input_norm: unsupported output dtype ", OUT_DTYPE); \
    }                                                                                     \
    break;

// Runs the lambda __VA_ARGS__ with in_t/out_t bound to the kernel types of the two dtypes. The dtypes
// were checked before (check_affine_args): the defaults are unreachable from the ops.
#define FIN_DISPATCH_IN_OUT(IN_DTYPE, OUT_DTYPE, ...)                                 \
  switch (IN_DTYPE) {                                                                 \
    FIN_IN_CASE(Byte, OUT_DTYPE, __VA_ARGS__)                                         \
    FIN_IN_CASE(UInt16, OUT_DTYPE, __VA_ARGS__)                                       \
    FIN_IN_CASE(Half, OUT_DTYPE, __VA_ARGS__)                                         \
    FIN_IN_CASE(BFloat16, OUT_DTYPE, __VA_ARGS__)                                     \
    FIN_IN_CASE(Float, OUT_DTYPE, __VA_ARGS__)                                        \
    default:                                                                          \
      STD_TORCH_CHECK(false, "fused_input_norm: unsupported input dtype ", IN_DTYPE); \
  }

// The resize op (uint8 input): the affine's output dtypes, and uint8, the resampled bytes themselves (with
// weight 1 and bias 0) for engines that normalize later on the device (vLLM's mm_device_do_normalize).
#define FIN_DISPATCH_RESIZE_OUT(OUT_DTYPE, ...)                                         \
  switch (OUT_DTYPE) {                                                                  \
    FIN_OUT_CASE(Byte, Byte, __VA_ARGS__)                                               \
    FIN_OUT_CASE(Byte, Half, __VA_ARGS__)                                               \
    FIN_OUT_CASE(Byte, BFloat16, __VA_ARGS__)                                           \
    FIN_OUT_CASE(Byte, Float, __VA_ARGS__)                                              \
    default:                                                                            \
      STD_TORCH_CHECK(false, "fused_input_norm: unsupported output dtype ", OUT_DTYPE); \
  }

}  // namespace fused_input_norm
