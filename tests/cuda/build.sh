#!/usr/bin/env bash
# Builds the torch-free GPU check (tests/cuda/*.cu + the csrc/ kernel headers; no torch) for sm_90 into
# BUILD_DIR/gpu_check: each translation unit by its own nvcc line, JOBS at a time, then one link.
#   bash tests/cuda/build.sh [BUILD_DIR] [JOBS]      (nvcc from CUDA_HOME, default /usr/local/cuda)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/build-gpu-check}
jobs=${2:-$(nproc)}
mkdir -p "$out"
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
flags=(-std=c++17 -O3 -arch=sm_90 -I"$root/csrc" -I"$root/tests/cuda" -Xcompiler -pthread --expt-relaxed-constexpr)
src=$root/tests/cuda
units=("main.cu:main" "resize_cases.cu:resize" "affine_big.cu:big")
for i in 0 1 2 3 4; do units+=("affine_cases.cu:affine_in$i:-DCHECK_IN=$i"); done
echo "$NVCC ${flags[*]} -c tests/cuda/<unit>.cu  (${#units[@]} units, $jobs at a time)"
start=$(date +%s)
pids=()
status=0
for u in "${units[@]}"; do
  IFS=: read -r file obj define <<< "$u"
  "$NVCC" "${flags[@]}" ${define:+"$define"} -c "$src/$file" -o "$out/$obj.o" &
  pids+=($!)
  if (( ${#pids[@]} >= jobs )); then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
(( status == 0 )) || { echo "build failed"; exit 1; }
"$NVCC" -arch=sm_90 -Xcompiler -pthread "$out"/*.o -o "$out/gpu_check"
echo "built $out/gpu_check in $(( $(date +%s) - start )) s"
