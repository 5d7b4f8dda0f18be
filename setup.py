"""Builds fused_input_norm._C: a CUDAExtension (hipified automatically on a ROCm torch) or a CppExtension.

The extension uses only the LibTorch stable ABI (torch/csrc/stable, torch/headeronly), so one wheel serves
every torch from TORCH_TARGET_VERSION on: it calls torch's C shims in libtorch_cpu and nothing else of
torch, and a CUDA build carries its own CUDA runtime (static cudart), so it also loads on a CPU-only torch.

The GPU backend is chosen from the installed torch and the toolkit found, never from whether a GPU is
present, so a GPU-less machine builds a CUDA wheel. Knobs (environment variables):
  FUSED_INPUT_NORM_FORCE_CPU=1   build the CPU-only extension even where a CUDA/ROCm toolkit is found
  FUSED_INPUT_NORM_SANITIZE=1    CPU-only build with AddressSanitizer + UBSan (scripts/sanitize.sh)
  TORCH_CUDA_ARCH_LIST           CUDA archs, e.g. "9.0" (default: "8.0;9.0+PTX")
  PYTORCH_ROCM_ARCH              ROCm archs, e.g. "gfx90a;gfx942" (default: "gfx90a;gfx942")
  MAX_JOBS                       parallel compile jobs
"""

import glob
import os
import sys

# torch guesses CUDA_HOME from the `nvcc` on PATH, which is a wrapper script in /usr/local/bin on some
# machines (-> /usr/local, and linking fails); prefer the standard toolkit location when none is set.
if not os.environ.get("CUDA_HOME") and not os.environ.get("CUDA_PATH") and os.path.exists("/usr/local/cuda/bin/nvcc"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"

import setuptools
import torch
from setuptools import setup
from setuptools.dist import Distribution
from torch.utils.cpp_extension import (
    CUDA_HOME,
    IS_HIP_EXTENSION,
    BuildExtension,
    CppExtension,
    CUDAExtension,
)

# The oldest torch the extension supports, as the stable headers encode versions (major, minor bytes first).
# 2.11: every stable API the glue calls is there (2.10 lacks two dtype shims it uses), and the current CUDA
# stream comes from a C shim libtorch_cuda exports since 2.10 (csrc/cuda_launch.h), not from 2.13's
# Stream::nativeHandle. Keep pyproject.toml's torch>= and CMakeLists.txt's FIN_TORCH_TARGET_VERSION in step.
TORCH_TARGET_VERSION = "0x020B000000000000"
DEFAULT_CUDA_ARCHS = "8.0;9.0+PTX"
DEFAULT_ROCM_ARCHS = "gfx90a;gfx942"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "0") not in ("", "0")


SANITIZE = env_flag("FUSED_INPUT_NORM_SANITIZE")
# -O1 and -g1 (line tables: a report still names file and line), as the sanitizers' docs advise: -O3 -g made
# this build the slowest of CI's (347 s on 2 cores, for 30 s of tests).
SANITIZER_FLAGS = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
    "-O1",
    "-g1",
]


def gpu_backend() -> str | None:
    if env_flag("FUSED_INPUT_NORM_FORCE_CPU") or SANITIZE:
        return None
    if IS_HIP_EXTENSION:  # a ROCm torch with a ROCm toolkit: CUDAExtension hipifies csrc/ itself
        return "hip"
    if torch.version.cuda is not None and CUDA_HOME is not None:
        return "cuda"
    return None


class IncrementalBuildExt(BuildExtension):
    """Compiles into a persistent directory per environment and backend, so ninja recompiles only what
    changed: pip's editable and wheel builds otherwise start from a fresh temporary directory each time
    (and reset options given to setup(), hence a subclass). `force`: setuptools' own up-to-date check
    ignores headers and build knobs, while ninja tracks both (depfiles, command lines): let ninja decide."""

    def finalize_options(self) -> None:
        super().finalize_options()
        flavour = gpu_backend() or ("cpu-sanitize" if SANITIZE else "cpu")
        self.build_temp = os.path.join(
            "build", f"{os.path.basename(sys.prefix).lstrip('.')}-torch{torch.__version__}-{flavour}"
        )
        self.force = True


def extension():
    here = os.path.dirname(os.path.abspath(__file__))
    sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
    backend = gpu_backend()
    # -g0: setuptools puts Python's own CFLAGS first, and they carry -g. Debug info for these template-heavy
    # kernels doubled the first build on 2 cores (csrc/affine_cpu.cpp: 165 s with it, 68 s without, as CMake's
    # Release build compiles it) and the size of the .so; later flags win, so -g0 drops it (the sanitizer
    # build adds line tables back after it).
    cxx_flags = ["-O3", "-fvisibility=hidden", "-g0"]
    link_flags = []
    if SANITIZE:
        cxx_flags = [*cxx_flags, *SANITIZER_FLAGS]
        link_flags += SANITIZER_FLAGS
    common = {
        "include_dirs": [os.path.join(here, "csrc")],
        "extra_link_args": link_flags,
        "py_limited_api": True,
    }
    macros = [("FIN_PYTHON_MODULE", None), ("TORCH_TARGET_VERSION", TORCH_TARGET_VERSION)]
    if backend is None:
        print("fused_input_norm: building the CPU-only extension")
        ext = CppExtension(
            "fused_input_norm._C", sources, define_macros=macros, extra_compile_args={"cxx": cxx_flags}, **common
        )
        ext.libraries = ["torch_cpu"]  # the stable C shims; torch's other libraries are not needed
        return ext
    macros.append(("FIN_WITH_GPU", None))
    if backend == "cuda":
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_CUDA_ARCHS)
        print(f"fused_input_norm: building CUDA for {os.environ['TORCH_CUDA_ARCH_LIST']} with {CUDA_HOME}")
    else:
        os.environ.setdefault("PYTORCH_ROCM_ARCH", DEFAULT_ROCM_ARCHS)
        macros.append(("FIN_GPU_ARCHS", '"' + os.environ["PYTORCH_ROCM_ARCH"] + '"'))
        print(f"fused_input_norm: building HIP for {os.environ['PYTORCH_ROCM_ARCH']}")
    ext = CUDAExtension(
        "fused_input_norm._C",
        sources + sorted(glob.glob(os.path.join("csrc", "*.cu"))),
        define_macros=macros,
        extra_compile_args={"cxx": cxx_flags, "nvcc": ["-O3", "-lineinfo"]},
        **common,
    )
    # CUDAExtension would link libtorch_cuda, libc10_cuda and the shared cudart, none of which a CPU-only
    # torch has; the stable shims are all in libtorch_cpu. ROCm wheels only run on a ROCm torch.
    # dl: the current stream is read from torch's GPU library without linking it (csrc/cuda_launch.h).
    ext.libraries = ["torch_cpu", "cudart_static" if backend == "cuda" else "amdhip64", "dl"]
    return ext


class ExtensionOnlyDistribution(Distribution):
    """pyproject.toml's metadata left unread: setuptools < 77 (the one a fresh Python 3.11 venv bundles is
    65.5) rejects its PEP 639 `license = "Apache-2.0"` before compiling anything. Only for `setup.py build_ext
    --inplace` (scripts/gpu_check.sh on a machine whose setuptools is whatever its image holds): the
    extension needs none of the metadata; wheels and pip installs ask for setuptools >= 77 (build-system)."""

    def _get_project_config_files(self, filenames):  # setuptools 61-76's split of INI and TOML config files
        ini_files, _ = super()._get_project_config_files(filenames)
        return ini_files, []


OLD_SETUPTOOLS = int(setuptools.__version__.split(".")[0]) < 77
if OLD_SETUPTOOLS and [a for a in sys.argv[1:] if not a.startswith("-")] != ["build_ext"]:
    sys.exit(
        f"setuptools {setuptools.__version__} cannot read pyproject.toml (PEP 639 license): only `setup.py "
        "build_ext --inplace` works with it; for a wheel or pip install, pip install 'setuptools>=77'"
    )

setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": IncrementalBuildExt},
    **({"distclass": ExtensionOnlyDistribution, "name": "fused_input_norm"} if OLD_SETUPTOOLS else {}),
    options={
        # torch compiles py_limited_api extensions with Py_LIMITED_API=3.10 (cpp_extension's
        # min_supported_cpython), and requires-python is >=3.10: the wheel is cp310-abi3.
        "bdist_wheel": {"py_limited_api": "cp310"},
    },
)
