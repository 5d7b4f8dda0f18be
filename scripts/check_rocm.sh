#!/usr/bin/env bash
# ROCm check without an AMD GPU or a ROCm torch: the whole extension built for HIP through the project's
# own ROCm path (CMake, FIN_USE_HIP=ON: csrc/ hipified into BUILD_DIR, every source compiled with
# USE_ROCM/__HIP_PLATFORM_AMD__ against the installed torch's headers, linked against libtorch_cpu and
# libamdhip64), then loaded into the torch here and put through the CPU op tests. Steps:
#   1. hipify (CMake's configure): no CUDA runtime name may survive in the hipified tree;
#   2. the build: every .cpp with the C++ compiler, every .hip with the HIP language (clang), which compiles
#      every kernel for every dtype pair and arch (the dispatch launches them all);
#   3. the library in BUILD_DIR/libfused_input_norm.so: one code object per arch in its offload bundle, no
#      torch C++ symbol imported, libamdhip64 linked;
#   4. torch.ops.load_library of it (the HIP runtime loads without a GPU), the GPU kernels registered for the
#      CUDA dispatch key (ROCm torch dispatches HIP tensors there), and the CPU op tests run through it.
# MI300: gfx940, the nearest arch Debian's hipcc 5.2 (LLVM 15) knows; gfx942 needs a newer ROCm (docs/platforms.md).
#   PYTHON=.venv/bin/python   ROCM_ARCHS="gfx90a;gfx940"   CMAKE=cmake
#   ROCM_TESTS="tests/test_ops.py tests/test_validation.py"  (pytest args; the CPU op tests run through it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: check_rocm.sh BUILD_DIR}
PY=${PYTHON:-.venv/bin/python}
# CMake runs PY from elsewhere: make it absolute. PYTHON may be absolute, relative to the repository root (as
# VENV in the other scripts) or a command on PATH.
case $PY in /*) ;; */*) PY=$PWD/$PY ;; *) PY=$(command -v "$PY") || { echo "no $PY on PATH"; exit 1; } ;; esac
ARCHS=${ROCM_ARCHS:-gfx90a;gfx940}
CMAKE=${CMAKE:-cmake}
TESTS=${ROCM_TESTS:-tests/test_ops.py tests/test_validation.py}
start=$(date +%s)

# Debian's HIP (ROCm 5.2.3): the compiler and runtime, the CMake packages its HIP language needs (comgr,
# HSA) and header-only Thrust (torch's complex.h includes <thrust/complex.h> under hipcc).
pkgs=(hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev libthrust-dev libcub-dev)
if ! dpkg -s "${pkgs[@]}" > /dev/null 2>&1; then
  echo "installing Debian's HIP: ${pkgs[*]}"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" > /dev/null
fi
# The clang behind Debian's hipcc; CMake's HIP language wants clang itself, not the hipcc wrapper.
hip_clang=$(ls /usr/lib/llvm-*/bin/clang++ | sort -V | while read -r c; do
  if [ -e "$(dirname "$c")/clang-offload-bundler" ] && "$c" --version | grep -q "version 15"; then echo "$c"; fi
done | tail -1)
[ -n "$hip_clang" ] || { echo "no clang 15 with clang-offload-bundler (Debian's hipcc pulls it in)"; exit 1; }
bundler=$(dirname "$hip_clang")/clang-offload-bundler

rm -rf "$build"
mkdir -p "$build"
# Each arch must have a code object in the offload bundle (.hip_fatbin) of an object or library.
check_bundle() {
  objcopy -O binary --only-section=.hip_fatbin "$1" "$1.fatbin"
  local targets
  targets=$("$bundler" --list --type=o --input="$1.fatbin")
  rm -f "$1.fatbin"
  for arch in ${ARCHS//;/ }; do
    echo "$targets" | grep -- "--$arch\$" > /dev/null || { echo "no $arch code object in $1: $targets"; exit 1; }
  done
  echo "$targets" | grep amdgcn | sed 's/.*--//' | tr '\n' ' '
}

# The library, through CMake's FIN_USE_HIP path.
"$CMAKE" -S . -B "$build" -G Ninja -DPython3_EXECUTABLE="$PY" -DFIN_USE_HIP=ON -DFIN_HIP_ARCHS="$ARCHS" \
  -DCMAKE_HIP_COMPILER="$hip_clang" -DFIN_BUILD_TESTS=OFF > "$build/configure.log" 2>&1 || { tail -40 "$build/configure.log"; exit 1; }
grep "fused_input_norm:" "$build/configure.log"
# 1. The configure hipified csrc/ into BUILD_DIR/hipified. Raw CUDA runtime spellings left there would not
# build on ROCm. (c10::cuda:: and getCurrentCUDAStream are torch API names that ROCm torch keeps.)
leftovers=$(grep -nE '\bcuda[A-Z][A-Za-z]*\b|cuda_runtime|<<<' "$build"/hipified/*_hip.* "$build"/hipified/*.hip || true)
if [ -n "$leftovers" ]; then echo "CUDA names survived hipify:"; echo "$leftovers"; exit 1; fi
echo "hipified into $build/hipified, no CUDA runtime names left"
"$CMAKE" --build "$build" > "$build/build.log" 2>&1 || { grep -m20 -B2 -A5 "error" "$build/build.log"; exit 1; }
lib="$build/libfused_input_norm.so"
hip_units=$(sed -n 's/^build CMakeFiles\/fused_input_norm.dir\/hipified\/\([^ ]*\)\.o: \([A-Z]*\)_COMPILER.*/\1 (\2)/p' \
  "$build/build.ninja" | tr '\n' ' ')
# 2+3. The .hip units launch every GPU kernel for every dtype pair, index width and variant (the
# dispatch in affine_cuda.cu), so building them compiles each kernel for each arch.
echo "compiled for ROCm: $hip_units"
targets=$(check_bundle "$lib")
echo "linked: $lib, $(du -h "$lib" | cut -f1), code objects: $targets"
# Only torch's C shims (extern "C") from libtorch, as the stable ABI promises; the HIP runtime from libamdhip64.
cxx_torch=$(nm -D --undefined-only "$lib" | grep -E ' U _ZN(3c10|5torch|2at)' || true)
[ -z "$cxx_torch" ] || { echo "imports torch C++ symbols:"; echo "$cxx_torch"; exit 1; }
ldd "$lib" | grep libamdhip64 > /dev/null || { echo "not linked against libamdhip64"; exit 1; }

# 4. Load it into the torch here (not a ROCm build, no AMD GPU) and check the registrations.
"$PY" - "$lib" <<'PY'
import json
import sys

import torch

torch.ops.load_library(sys.argv[1])
info = json.loads(torch.ops.fused_input_norm.build_info())
assert info["backends"] == ["cpu", "hip"], info
has = torch._C._dispatch_has_kernel_for_dispatch_key
for op in ("fused_input_norm::affine", "fused_input_norm::affine_out"):
    # A ROCm torch gives HIP tensors device type "cuda" and dispatches them to the CUDA key.
    missing = [key for key in ("CPU", "CUDA") if not has(op, key)]
    assert not missing, f"{op}: no kernel for {missing}"
print(f"loaded into torch {torch.__version__}: {info}; CPU and CUDA (= ROCm's HIP tensors) kernels registered")
PY
# The CPU op tests, through this library instead of the package's extension (fused_input_norm/__init__.py).
# shellcheck disable=SC2086  # TESTS is a list of pytest arguments
FUSED_INPUT_NORM_LIBRARY="$(realpath "$lib")" "$PY" -m pytest -q -p no:cacheprovider --durations=3 $TESTS 2>&1 | tail -6
echo "ROCm check passed in $(($(date +%s) - start)) s: $lib ($(du -h "$lib" | cut -f1)) for ${ARCHS}"
