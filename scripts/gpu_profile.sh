#!/usr/bin/env bash
# Where the GPU time goes in the rows furthest from their floor (after scripts/gpu_check.sh has measured them):
# Nsight Compute on the torch-free check's timing group, one kernel family at a time, and each kernel's
# registers, shared memory and spills from the built binary. For a lent GPU machine with ncu (Firecracker
# runtimes read the counters; gVisor does not), nothing fetched:
#   bash scripts/gpu_profile.sh OUT_DIR
# OUT_DIR gets resources.txt (cuobjdump) and one ncu-<family>.txt per kernel family. About 2 minutes.
set -uo pipefail
out=${1:?usage: gpu_profile.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
PY=${PYTHON:-python3}
work=$(mktemp -d /tmp/gpu_profile.XXXXXX)
NCU=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)}

timeout 90 "$PY" tests/cuda/peers.py photos "$work/photos" || echo "no photos: synthetic ones"
rule=$("$PY" tests/cuda/peers.py pil-rule 2>/dev/null || echo 13)
timeout 300 bash tests/cuda/build.sh "$work/build" > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
tail -1 "$out/build.log"
cuobjdump --dump-resource-usage "$work/build/gpu_check" > "$out/resources.txt" 2>&1 || echo "cuobjdump failed"
grep -E "Function|REG" "$out/resources.txt" | sed 's/^/  /' | head -60

[ -n "$NCU" ] || { echo "no ncu on this machine: resources only"; exit 0; }
echo "ncu: $NCU ($("$NCU" --version | tail -1))"
# (family, kernel-name regex, launches): the first launches in the timing group's order, i.e. the first case
# of each family: the 12 MP resize's two passes, NHWC's pixel kernel, the strided walk, the contiguous kernel.
for spec in "resize:resample_pass_kernel|affine_strided_source_kernel:2" "pixels:affine_pixels_kernel:2" \
  "strided:affine_strided_kernel:2" "contiguous:affine_contiguous_kernel:1"; do
  IFS=: read -r family regex count <<< "$spec"
  echo "--- ncu $family ($regex, $count launches)"
  timeout 120 "$NCU" --clock-control none -k "regex:$regex" --launch-count "$count" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    "$work/build/gpu_check" --group timing --json "$work/t.json" --photos "$work/photos" --pil-rule "$rule" \
    --reps 3 > "$out/ncu-$family.txt" 2>&1 || echo "ncu $family: exit $? (see ncu-$family.txt)"
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Stall" \
    "$out/ncu-$family.txt" | head -40
done
rm -rf "$work"
