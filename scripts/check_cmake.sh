#!/usr/bin/env bash
# Builds libfused_input_norm.so with CMake into BUILD_DIR, runs the C++ dispatcher test (ctest), then loads
# the library into a Python that never imports the package (torch.ops.load_library) and checks the op.
#   CMAKE=cmake VENV=.venv bash scripts/check_cmake.sh BUILD_DIR [extra cmake -D args]
# GENERATE_ONLY=1 stops after the configure and generate (a CMake version's policies and the generated build
# files are checked there), before the ~3-4 min build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: check_cmake.sh BUILD_DIR [cmake args]}
shift
CMAKE=${CMAKE:-cmake}
PY=${VENV:-.venv}/bin/python
case $PY in /*) ;; *) PY=$PWD/$PY ;; esac  # VENV absolute or relative to the repository root
echo "$("$CMAKE" --version | head -1), $("$PY" -c 'import torch; print("torch", torch.__version__)')"
rm -rf "$build"
# The plain configure a user runs; the Python is named so CMake finds the venv's torch and nvrtc.
"$CMAKE" -S . -B "$build" -G Ninja -DPython3_EXECUTABLE="$PY" \
  -DCMAKE_PREFIX_PATH="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" "$@" > "$build.configure.log" 2>&1 \
  || { tail -40 "$build.configure.log"; exit 1; }
grep "fused_input_norm: GPU backend" "$build.configure.log"
if [ "${GENERATE_ONLY:-0}" = 1 ]; then
  grep -q "^build " "$build/build.ninja" || { echo "no build statements in $build/build.ninja"; exit 1; }
  echo "configured and generated: $(grep -c '^build ' "$build/build.ninja") build statements in $build/build.ninja (GENERATE_ONLY=1: not built)"
  exit 0
fi
start=$(date +%s)
"$CMAKE" --build "$build" > "$build.build.log" 2>&1 || { grep -m20 -B2 -A5 "error" "$build.build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
(cd "$build" && ctest --output-on-failure)
"$PY" - "$build/libfused_input_norm.so" <<'PY'
import sys
import torch
torch.ops.load_library(sys.argv[1])
x = torch.randint(0, 256, (5, 3, 7), dtype=torch.uint8)
w, b = torch.rand(3), torch.rand(3)
y = torch.ops.fused_input_norm.affine(x, w, b, 1, torch.float32)
reference = x.double() * w.double()[:, None] + b.double()[:, None]
torch.testing.assert_close(y.double(), reference, rtol=1e-6, atol=1e-6)
print("torch.ops.load_library:", sys.argv[1], "->", torch.ops.fused_input_norm.build_info())
PY
