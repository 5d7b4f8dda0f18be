#!/usr/bin/env bash
# ROCm check that runs without an AMD GPU or a ROCm torch: hipify csrc/ as torch's build would, make sure
# no CUDA runtime names survive, and compile the hipified, torch-free kernel header (every kernel for
# every dtype pair, tests/rocm/instantiate_kernels.cu) for MI200 (gfx90a) and MI300 (gfx940).
#   PYTHON=.venv/bin/python (any python with torch, for torch.utils.hipify)   ROCM_ARCHS="gfx90a gfx940"
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-.venv/bin/python}
ARCHS=${ROCM_ARCHS:-gfx90a gfx940}

if ! command -v hipcc > /dev/null; then
  echo "installing Debian's hipcc"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends hipcc libamdhip64-dev > /dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp csrc/* tests/rocm/instantiate_kernels.cu "$work/src/"  # hipify wants absolute, disjoint dirs
"$PY" - "$work/src" "$work/hip" <<'PY'
import sys
from torch.utils.hipify import hipify_python
hipify_python.hipify(project_directory=sys.argv[1], output_directory=sys.argv[2], includes=["*"],
                     is_pytorch_extension=True, show_detailed=False, show_progress=False)
PY
echo "hipified: $(cd "$work/hip" && ls | tr '\n' ' ')"

# Raw CUDA runtime spellings left in the hipified tree would not build on ROCm. (c10::cuda:: and
# getCurrentCUDAStream are torch API names that ROCm torch keeps.)
leftovers=$(grep -nE '\bcuda[A-Z][A-Za-z]*\b|cuda_runtime|<<<' "$work"/hip/*_hip.h "$work"/hip/*.hip || true)
if [ -n "$leftovers" ]; then echo "CUDA names survived hipify:"; echo "$leftovers"; exit 1; fi
echo "no CUDA runtime names left"

flags=()
for arch in $ARCHS; do flags+=("--offload-arch=$arch"); done
HIP_PLATFORM=amd hipcc -std=c++17 -O3 "${flags[@]}" -I"$work/hip" -c "$work/hip/instantiate_kernels.hip" \
  -o "$work/kernels.o"
# The object embeds an offload bundle (.hip_fatbin): it must hold one code object per requested arch.
bundler=$(command -v clang-offload-bundler || ls /usr/lib/llvm-*/bin/clang-offload-bundler 2> /dev/null | tail -1)
objcopy -O binary --only-section=.hip_fatbin "$work/kernels.o" "$work/fatbin.bin"
targets=$("$bundler" --list --type=o --input="$work/fatbin.bin")
for arch in $ARCHS; do
  echo "$targets" | grep -q "$arch" || { echo "no $arch code object in the bundle: $targets"; exit 1; }
done
echo "compiled every kernel x dtype pair; bundle targets: $(echo "$targets" | tr '\n' ' ')"
