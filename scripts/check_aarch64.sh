#!/usr/bin/env bash
# aarch64 check on an x86-64 machine: cross-compiles the extension's library (CMake, CPU-only: the ops and
# the CPU kernels, NEON) with Debian's g++-aarch64-linux-gnu against the aarch64 torch wheel's headers and
# libtorch_cpu, leaves it in BUILD_DIR, then runs the CPU kernels' torch-free tests under qemu-aarch64:
# every input x output dtype and every CPU layout against a float64 reference and bit for bit against the
# scalar rounding (tests/cpp/cpu_kernels.cpp), with the neon and the default capability, and built without
# any SIMD path (plain C++, not vectorized), plus the GPU kernels' host emulation; then the resize's CPU kernels
# (neon and default), cross-built torch-free, by the host's pytest
# (PYTHON, default .venv/bin/python: Pillow and torchvision as references) through qemu. torch itself is not
# run under qemu (no aarch64 Python userland here; docs/platforms.md, aarch64). Ends with "N passed, 0 failed".
#   TORCH_VERSION=2.14.1   AARCH64_CACHE=.ci-cache/aarch64 (the 454 MB wheel, reused by later runs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: check_aarch64.sh BUILD_DIR}
TORCH_VERSION=${TORCH_VERSION:-2.14.1}
cache=${AARCH64_CACHE:-.ci-cache/aarch64}
CMAKE=${CMAKE:-cmake}
start=$(date +%s)

pkgs=(g++-aarch64-linux-gnu qemu-user)
if ! dpkg -s "${pkgs[@]}" > /dev/null 2>&1; then
  echo "installing ${pkgs[*]}"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" > /dev/null
fi
sysroot=/usr/aarch64-linux-gnu  # Debian's aarch64 libc and libstdc++, for the linker and for qemu

# The aarch64 wheel (headers and libtorch_cpu) from PyPI, downloaded once; only what the build needs is
# unpacked (its include/ and the two libraries the library links).
torch_dir="$cache/torch-$TORCH_VERSION/torch"
if [ ! -e "$torch_dir/.unpacked" ]; then
  mkdir -p "$cache"
  if ! ls "$cache"/torch-"$TORCH_VERSION"-*aarch64.whl > /dev/null 2>&1; then
    echo "downloading the aarch64 torch $TORCH_VERSION wheel into $cache"
    python3 -m pip download -q --disable-pip-version-check --platform manylinux_2_28_aarch64 --python-version 3.11 \
      --only-binary=:all: --no-deps "torch==$TORCH_VERSION" -d "$cache"
  fi
  rm -rf "$cache/torch-$TORCH_VERSION"
  unzip -q "$(ls "$cache"/torch-"$TORCH_VERSION"-*aarch64.whl)" 'torch/include/*' 'torch/lib/libtorch_cpu.so' \
    'torch/lib/libc10.so' -d "$cache/torch-$TORCH_VERSION"
  touch "$torch_dir/.unpacked"
fi
echo "aarch64 torch $TORCH_VERSION: $torch_dir"

rm -rf "$build"
mkdir -p "$build"
# CMake's cross toolchain; the emulator line lets `ctest` run the tests under qemu too.
cat > "$build/aarch64-toolchain.cmake" << EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH $sysroot)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;$sysroot)
EOF
"$CMAKE" -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$build/aarch64-toolchain.cmake" \
  -DFIN_TORCH_DIR="$(realpath "$torch_dir")" -DFIN_CPU_KERNEL_TESTS=ON -DPython3_EXECUTABLE="$(command -v python3)" > "$build/configure.log" 2>&1 \
  || { tail -40 "$build/configure.log"; exit 1; }
"$CMAKE" --build "$build" > "$build/build.log" 2>&1 || { grep -m20 -B2 -A5 "error" "$build/build.log"; exit 1; }
lib="$build/libfused_input_norm.so"
file -b "$lib" | grep -q "ARM aarch64" || { echo "not an aarch64 library: $(file -b "$lib")"; exit 1; }
cxx_torch=$(aarch64-linux-gnu-nm -D --undefined-only "$lib" | grep -E ' U _ZN(3c10|5torch|2at)' || true)
[ -z "$cxx_torch" ] || { echo "imports torch C++ symbols:"; echo "$cxx_torch"; exit 1; }
# The NEON conversion really is in the library (float16 output: FCVTN, fcvtn in the disassembly).
# (grep without -q: an early exit would fail the pipe under pipefail)
fcvtn=$(aarch64-linux-gnu-objdump -d "$lib" | grep -c 'fcvtn' || true)
[ "$fcvtn" -gt 0 ] || { echo "no NEON float16 conversion (fcvtn) in $lib"; exit 1; }
echo "cross-built: $lib ($(du -h "$lib" | cut -f1), $(file -b "$lib" | cut -d, -f1-2)), links $(aarch64-linux-gnu-readelf -d "$lib" | grep -o 'NEEDED.*\[lib[a-z0-9_+]*\.so[.0-9]*' | grep -o 'lib[a-z0-9_+]*\.so[.0-9]*' | tr '\n' ' ')"

# The tests under qemu: each program ends with "N passed, M failed".
total_passed=0
total_failed=0
run() {
  local out
  out=$(qemu-aarch64 -L "$sysroot" "$@" 2>&1) || true
  echo "$out" | grep -E '^(CPU kernels|FAIL)' | head -20 || true
  local counts
  counts=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
  [ -n "$counts" ] || { echo "$1: no result line"; echo "$out" | tail -5; exit 1; }
  echo "  $(basename "$1"): $counts"
  total_passed=$((total_passed + $(echo "$counts" | cut -d' ' -f1)))
  total_failed=$((total_failed + $(echo "$counts" | cut -d' ' -f3)))
}
run "$build/cpu_kernels"  # capability neon, the one an aarch64 CPU runs
FUSED_INPUT_NORM_CPU_CAPABILITY=default run "$build/cpu_kernels"  # forced: software float16 rounding
run "$build/cpu_kernels_plain"
run "$build/kernel_emulation"

# The resize's CPU kernels (resample_cpu_kernels.h) at neon and default, cross-built torch-free and run under
# qemu by the host's pytest against Pillow and torchvision themselves.
python=${PYTHON:-.venv/bin/python}
aarch64-linux-gnu-g++ -std=c++17 -O2 -Wall -Werror -Icsrc tests/cpp/resize_emulation.cpp csrc/cpu_capability.cpp \
  -o "$build/resize_emulation"
resize=$(FUSED_INPUT_NORM_RESIZE_EMULATOR="$build/resize_emulation" FUSED_INPUT_NORM_RESIZE_RUNNER="qemu-aarch64 -L $sysroot" \
  "$python" -m pytest -q -p no:cacheprovider tests/test_resize_emulation.py -k cpu_kernels 2>&1) \
  || { echo "$resize" | tail -30; exit 1; }
echo "  resize_emulation --cpu (neon and default; bilinear, bicubic, lanczos, OpenCV's cubic, torch's bilinear_no_antialias, float32 bilinear and float32 antialiased filters): $(echo "$resize" | tail -1)"
total_passed=$((total_passed + $(echo "$resize" | tail -1 | grep -oE '^[0-9]+')))

# Emulated instruction throughput: qemu translates each aarch64 instruction, so a time under it says how
# many instructions ran, not how fast a real core would run them.
neon=$(qemu-aarch64 -L "$sysroot" "$build/cpu_kernels" --time)
plain=$(qemu-aarch64 -L "$sysroot" "$build/cpu_kernels_plain" --time)
echo "$neon"
echo "$plain"
ms() { echo "$1" | grep -oE "$2 [0-9.]+ ms" | grep -oE '[0-9.]+ ms' | cut -d' ' -f1; }
for what in "u8->bf16 patches" "u8->fp16 patches" "u8->bf16 HWC->CHW"; do
  awk -v a="$(ms "$plain" "$what")" -v b="$(ms "$neon" "$what")" -v w="$what" \
    'BEGIN { printf "qemu (emulated instruction throughput, not speed): %s plain/NEON = %.1fx\n", w, a / b }'
done
echo "aarch64 check done in $(($(date +%s) - start)) s"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" = 0 ]
