#!/usr/bin/env bash
# The whole GPU check in one call, for a lent GPU machine whose python3 already has CUDA torch, nvcc and
# pytest (nothing is fetched): build for sm_90 only, count the SASS, run every GPU test, run the benchmark
# on the GPU (its plot too where matplotlib is installed).
#   bash scripts/gpu_check.sh RESULTS.json [LOG_DIR]
# Budget: about 1 min build, 2 min tests, 3 min benchmark (a third of it compiling the torch.compile cases),
# 1 min resize timing on an H200; the timeouts keep it under 12 minutes. LOG_DIR gets at most 8 files.
set -euo pipefail
json=${1:?usage: gpu_check.sh RESULTS.json [LOG_DIR]}
logs=${2:-$(dirname "$json")}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
start=$(date +%s)
"$PY" setup.py -q build_ext --inplace > "$logs/build.log" 2>&1 || { tail -50 "$logs/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
"$PY" -c "import fused_input_norm as f; info = f.build_info(); print(info); assert 'cuda' in info['backends']"

# Static instruction counts of the very kernels timed below (cuobjdump from triton or the toolkit).
"$PY" scripts/count_sass.py > "$logs/sass.txt" 2>&1 || echo "count_sass failed: see $logs/sass.txt"

# Every test that touches the GPU: the cuda params of the numeric tests and tests/test_gpu.py (slow ones too).
# The benchmark runs even when a test fails; the script's status is the tests'.
tests=0
timeout 240 "$PY" -m pytest -q -rs -p no:cacheprovider tests -k "cuda or gpu" --junitxml="$logs/gpu-tests.xml" \
  > "$logs/gpu-tests.log" 2>&1 || tests=$?
tail -25 "$logs/gpu-tests.log"

plot=()
if "$PY" -c "import matplotlib" 2>/dev/null; then plot=(--plot "$logs/bench.png"); fi
timeout 280 "$PY" -m fused_input_norm.bench --device cuda --reps 30 --cases '^(?!resize)' --json "$json" "${plot[@]}" 2>&1 | tee "$logs/bench.txt"
# The resize on the GPU against torch's float interpolate + normalize, and CUDA == CPU bit for bit.
timeout 120 "$PY" scripts/gpu_resize_timing.py --reps 30 2>&1 | tee "$logs/resize.txt" || true
exit $tests
