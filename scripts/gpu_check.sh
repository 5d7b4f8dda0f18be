#!/usr/bin/env bash
# The whole GPU check in one call, for a lent GPU machine (nothing is fetched; nvcc and python3 with torch,
# numpy, Pillow and scikit-image are expected there):
#   1. the torch-free check (tests/cuda/): real photos made from scikit-image's, the check built by nvcc for
#      sm_90 (no torch header, no libtorch), run group by group (each its own process, so a lost CUDA context
#      cannot hide the other groups): every affine layout x dtype pair, > 2^31 elements, the resize on the
#      photos for both references and filters, each bit for bit against the host; then the timings against a
#      device-to-device copy of the same bytes and the DRAM floor;
#   2. its peers with the machine's own torch (tests/cuda/peers.py): the check's resizes against Pillow and
#      torch's CPU kernel, torch's CUDA float interpolate + normalize timed and counted against Pillow,
#      nvJPEG's decode of a 12 MP JPEG timed;
#   3. the extension on the machine's own torch (>= 2.11, the extension's floor; older: said, and skipped):
#      built in place by `setup.py build_ext` with whatever setuptools the image holds (65.5 works), for
#      sm_90 only; then every test whose id names cuda, gpu or nvjpeg (the device-parametrized op, layout,
#      module, resize, processor, video, compile and CUDA-graph tests; tests needing a package the image
#      lacks, vllm or torchcodec, skip with the reason), the benchmark's GPU rows and the resize timings.
#   bash scripts/gpu_check.sh OUT_DIR
# OUT_DIR gets at most 8 files: check.log (everything printed), results.json, peers.json, build.log, and with
# the extension gpu-tests.log, bench.json, bench.txt, sass.txt. Whole run under 8 minutes (a deadline bounds
# every step); about 3 minutes without the extension.
set -uo pipefail
out=${1:?usage: gpu_check.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
PY=${PYTHON:-python3}
start=$(date +%s)
deadline=$((start + ${GPU_CHECK_SECONDS:-470}))
# A step's timeout: what it asks for, or what is left before the deadline.
budget() { local left=$((deadline - $(date +%s))); echo $(($1 < left ? $1 : (left > 0 ? left : 1))); }
work=$(mktemp -d /tmp/gpu_check.XXXXXX)

main() {
status=0

echo "=== gpu_check $(date -u +%FT%TZ) in $PWD ($(git rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
  --format=csv 2>&1 || echo "nvidia-smi failed"
torch_version=$("$PY" -c "import torch; print(torch.__version__)" 2>/dev/null || echo none)
echo "python: $("$PY" --version 2>&1), torch $torch_version; nvcc: $(nvcc --version 2>/dev/null | tail -1)"

echo "=== 1. torch-free check (tests/cuda/)"
timeout "$(budget 90)" "$PY" tests/cuda/peers.py photos "$work/photos" || echo "no photos: the check uses synthetic ones"
rule=$("$PY" tests/cuda/peers.py pil-rule 2>/dev/null || echo 13)
echo "Pillow pass-order rule for reference 'pil': $rule"
build=$work/build
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then  # a dry run of this script elsewhere: reuse a build
  build=$GPU_CHECK_PREBUILT
  echo "using the check built in $build"
elif timeout "$(budget 300)" bash tests/cuda/build.sh "$build" > "$out/build.log" 2>&1; then
  tail -1 "$out/build.log"
else
  tail -30 "$out/build.log"
  echo "the torch-free check did not build"
  status=1
fi
summary=""
if [ -x "$build/gpu_check" ]; then
  for group in affine resize big timing; do
    t=$(budget 200)
    echo "--- group $group (timeout ${t} s)"
    timeout "$t" "$build/gpu_check" --group "$group" --json "$work/results-$group.json" --photos "$work/photos" \
      --dump "$work/dumps" --pil-rule "$rule" --deadline $((t > 10 ? t - 5 : t))
    rc=$?
    summary+="$group rc=$rc; "
    case $rc in
      0) ;;
      77) echo "no CUDA device visible to the check"; status=1; break ;;
      124 | 137) echo "group $group timed out after ${t} s"; status=1 ;;
      *) echo "group $group exited with $rc"; status=1 ;;
    esac
  done
  "$PY" - "$work" "$out/results.json" "$summary" <<'PY' || { echo "merging the results failed"; cp "$work"/results-*.json "$out/" 2>/dev/null; }
import json, pathlib, sys
work, dest, summary = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
parts = [json.loads(p.read_text()) for p in sorted(work.glob("results-*.json"))]
merged = {"groups": summary, "device": parts[0]["device"] if parts else None,
          "copy_gb_per_s": parts[0]["copy_gb_per_s"] if parts else None,
          "passed": sum(p["passed"] for p in parts), "failed": sum(p["failed"] for p in parts),
          "cases": [c for p in parts for c in p["cases"]], "timings": [t for p in parts for t in p["timings"]]}
dest.write_text(json.dumps(merged, indent=1) + "\n")
print(f"torch-free check: {merged['passed']} passed, {merged['failed']} failed ({summary.strip()})")
PY
fi

echo "=== 2. peers with the machine's torch $torch_version (tests/cuda/peers.py)"
timeout "$(budget 150)" "$PY" tests/cuda/peers.py peers --photos "$work/photos" --dumps "$work/dumps" \
  --results "$out/results.json" --json "$out/peers.json" || { echo "peers: failed or differed (see above)"; status=1; }

echo "=== 3. the extension (needs torch >= 2.11)"
if [ "${GPU_CHECK_SKIP_EXTENSION:-0}" = 1 ]; then
  echo "extension: skipped (GPU_CHECK_SKIP_EXTENSION=1)"
elif "$PY" -c "import sys, torch; v = tuple(int(x) for x in torch.__version__.split('+')[0].split('.')[:2]); sys.exit(v < (2, 11))" 2>/dev/null; then
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-$(nproc)} PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  echo "extension: torch $torch_version >= 2.11: build (MAX_JOBS=$MAX_JOBS, setuptools" \
    "$("$PY" -c 'import setuptools; print(setuptools.__version__)' 2>&1)), GPU tests, benchmark (within the deadline)"
  if timeout "$(budget 180)" "$PY" setup.py -q build_ext --inplace >> "$out/build.log" 2>&1; then
    "$PY" -c "import fused_input_norm as f; print(f.build_info())"
    timeout "$(budget 30)" "$PY" scripts/count_sass.py > "$out/sass.txt" 2>&1 || echo "count_sass failed: see sass.txt"
    timeout "$(budget 170)" "$PY" -m pytest -q -rs -p no:cacheprovider tests -k "cuda or gpu or nvjpeg" > "$out/gpu-tests.log" 2>&1 \
      || { echo "GPU tests failed (or ran out of time)"; status=1; }
    tail -15 "$out/gpu-tests.log"
    timeout "$(budget 150)" "$PY" -m fused_input_norm.bench --device cuda --reps 15 --cases '^(?!resize|video)' \
      --json "$out/bench.json" > "$out/bench.txt" 2>&1 || echo "bench failed or ran out of time: see bench.txt"
    tail -20 "$out/bench.txt"
    timeout "$(budget 60)" "$PY" scripts/gpu_resize_timing.py --reps 15 || echo "gpu_resize_timing failed or ran out of time"
  else
    tail -30 "$out/build.log"
    echo "extension: the build failed"
    status=1
  fi
else
  echo "extension: skipped (torch $torch_version < 2.11, the extension's floor): only the torch-free check and its peers ran"
fi
rm -rf "$work"
echo "=== gpu_check done in $(($(date +%s) - start)) s, status $status; files in $out: $(ls "$out" | tr '\n' ' ')"
return $status
}

main 2>&1 | tee "$out/check.log"
exit "${PIPESTATUS[0]}"
