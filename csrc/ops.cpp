// Schemas of every fused_input_norm op (the one place they are registered), build_info, and the Python module stub.
#if defined(FIN_PYTHON_MODULE)
#include <Python.h>
#endif
#include <torch/csrc/stable/library.h>

#include <sstream>
#include <string>

#include "affine.h"
#include "cpu_capability.h"

namespace fused_input_norm {

#if defined(FIN_WITH_GPU)
// affine_cuda.cu: the GPU backend's name ("cuda" or "hip") and its JSON fields (toolkit version, archs).
const char* gpu_backend_name();
std::string gpu_build_fields();
#endif
namespace {

std::string build_info() {
  std::ostringstream s;
  s << "{";
#if defined(FIN_WITH_GPU)
  s << "\"backends\": [\"cpu\", \"" << gpu_backend_name() << "\"], " << gpu_build_fields();
#else
  s << "\"backends\": [\"cpu\"]";
#endif
  s << ", \"cpu_capability\": \"" << cpu_capability_name(cpu_capability()) << "\"";
  s << "}";
  return s.str();
}

}  // namespace

STABLE_TORCH_LIBRARY(fused_input_norm, m) {
  m.def("affine(Tensor input, Tensor weight, Tensor bias, int dim=1, ScalarType? out_dtype=None) -> Tensor");
  m.def("affine_out(Tensor(a!) out, Tensor input, Tensor weight, Tensor bias, int dim=1) -> ()");
  m.def("build_info() -> str");
  // Resizing (resample.h): the coefficients of one axis, planned on the host once per size pair, and the
  // resize + affine + layout into `out`. `clip` (with patches): the input's images are the frames of clips,
  // each temporal_patch_size consecutive ones one temporal patch, instead of one frame repeated. `pad`: []
  // or (canvas_h, canvas_w, top, left, fill), the crop placed on a canvas of the fill byte.
  m.def("resample_plan(int in_size, int out_size, str resample=\"bicubic\", str reference=\"pil\") -> Tensor");
  m.def(
      "resize_affine_out(Tensor(a!) out, Tensor input, Tensor weight, Tensor bias, Tensor? row_plan, "
      "Tensor? col_plan, int[] size, int[] crop, str resample, bool vertical_first, int[] patches, "
      "bool clip=False, int[] pad=[]) -> ()");
}

// No tensor argument to dispatch on: one kernel for every backend.
STABLE_TORCH_LIBRARY_IMPL(fused_input_norm, CompositeExplicitAutograd, m) {
  m.impl("build_info", TORCH_BOX(&build_info));
}

}  // namespace fused_input_norm

#if defined(FIN_PYTHON_MODULE)
// The Python extension (setup.py) is a plain shared library whose import registers the ops above; it
// defines no Python functions, so it needs no pybind11 and builds against the limited API. The CMake
// library has no Python entry point: torch.ops.load_library or C++ linking loads it.
PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
#endif
