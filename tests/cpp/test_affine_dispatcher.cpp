// C++ consumers' view: call fused_input_norm::affine / affine_out through the dispatcher (the library is
// only linked, never included) and compare with a scalar loop. Exits non-zero on any mismatch.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

namespace {

int passed = 0;
int failed = 0;

void expect(bool ok, const char* what) {
  (ok ? passed : failed)++;
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
}

// The scalar reference in float64: x * weight[c] + bias[c], c the index along `dim`.
at::Tensor scalar_reference(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t dim) {
  const at::Tensor xc = x.contiguous().to(at::kDouble);
  at::Tensor ref = at::empty(x.sizes(), x.options().dtype(at::kDouble));
  const double* in = xc.const_data_ptr<double>();
  double* out = ref.mutable_data_ptr<double>();
  const float* w = weight.const_data_ptr<float>();
  const float* b = bias.const_data_ptr<float>();
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t channels = x.size(dim);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / inner) % channels;
    out[i] = in[i] * static_cast<double>(w[c]) + static_cast<double>(b[c]);
  }
  return ref;
}

bool close_to(const at::Tensor& y, const at::Tensor& ref, double rel) {
  const at::Tensor err = (y.to(at::kDouble) - ref).abs();
  const at::Tensor tol = ref.abs() * rel + 1e-6;
  return err.le(tol).all().item<bool>();
}

}  // namespace

int main() {
  auto affine = c10::Dispatcher::singleton()
                    .findSchemaOrThrow("fused_input_norm::affine", "")
                    .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
                                      std::optional<at::ScalarType>)>();
  auto affine_out =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fused_input_norm::affine_out", "")
          .typed<void(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t)>();
  at::manual_seed(0);
  const at::Tensor weight = at::rand({3}) * 4 - 2;
  const at::Tensor bias = at::rand({3}) * 4 - 2;

  const at::Tensor patches = at::randint(0, 256, {37, 3, 392}, at::kByte);
  const at::Tensor ref = scalar_reference(patches, weight, bias, 1);
  expect(close_to(affine.call(patches, weight, bias, 1, at::kFloat), ref, 1e-6), "uint8 patches -> float32");
  const at::Tensor bf16 = affine.call(patches, weight, bias, 1, at::kBFloat16);
  expect(bf16.scalar_type() == at::kBFloat16 && close_to(bf16, ref, 1.0 / 256), "uint8 patches -> bfloat16");

  const at::Tensor nhwc = at::randn({2, 5, 7, 3}) * 3;
  const at::Tensor out = at::full({2, 5, 7, 3}, 1234.5, at::kHalf);
  affine_out.call(out, nhwc, weight, bias, -1);
  expect(close_to(out, scalar_reference(nhwc, weight, bias, 3), 1.0 / 1024), "float32 NHWC -> float16 out=");

  // The stable ABI raises std::runtime_error; the message names the argument and starts with the Python
  // exception type fused_input_norm's Python API raises for it.
  std::string message;
  try {
    affine.call(patches, at::rand({4}), bias, 1, std::nullopt);
  } catch (const std::exception& e) {
    message = e.what();
  }
  expect(message.rfind("[ValueError] fused_input_norm.affine: weight must have one value per channel", 0) == 0,
         "a weight of the wrong length raises a [ValueError] naming weight");

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
