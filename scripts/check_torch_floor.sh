#!/usr/bin/env bash
# The floor, built as the lent GPU machine builds it: torch 2.11.0 (the oldest torch the extension supports,
# and the one that machine's image holds, with torchvision 0.26), a venv whose setuptools is the one Python
# bundles (65.5 on 3.11: too old for pyproject.toml's PEP 639 license, as an image's may be), and the same
# in-place build command as scripts/gpu_check.sh, for sm_90 only. Then: the CUDA kernels are in the .so
# (build_info, cuobjdump), and the test suite passes against that build (CPU here; the CUDA params skip).
# The build happens in a copy of the tracked tree, so the checkout's own (editable) build is left alone.
#   bash scripts/check_torch_floor.sh BUILD_DIR [pytest args]     VENV=.venv-torch211 (kept for step 8)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: check_torch_floor.sh BUILD_DIR [pytest args]}
shift
root=$PWD
VENV=${VENV:-.venv-torch211}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} MAX_JOBS=${MAX_JOBS:-2} TORCH_CUDA_ARCH_LIST=9.0
quiet_pip() { "$VENV/bin/python" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }

start=$(date +%s)
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# No setuptools upgrade: the venv keeps the one Python bundled, which is what the build below must cope with.
quiet_pip install -q --disable-pip-version-check torch==2.11.0 torchvision==0.26.0 numpy ninja pytest \
  pytest-xdist hypothesis expecttest transformers scikit-image matplotlib opencv-python-headless
setuptools_version=$("$VENV/bin/python" -c "import setuptools; print(setuptools.__version__)")
echo "$VENV: $("$VENV/bin/python" -c "import torch; print('torch', torch.__version__)"), setuptools $setuptools_version ($(($(date +%s) - start)) s)"

rm -rf "$build" && mkdir -p "$build/src"
git ls-files -z | xargs -0 tar -c | tar -x -C "$build/src"
start=$(date +%s)
(cd "$build/src" && "$root/$VENV/bin/python" setup.py -q build_ext --inplace > "$root/$build/build.log" 2>&1) ||
  { tail -40 "$build/build.log"; echo "the in-place build against torch 2.11 failed"; exit 1; }
echo "built in place with setuptools $setuptools_version in $(($(date +%s) - start)) s"

cd "$build/src"
so=$(ls fused_input_norm/_C*.so)
PYTHONPATH=$PWD "$root/$VENV/bin/python" - << 'PY'
import torch

import fused_input_norm as f

info = f.build_info()
print(info)
assert torch.__version__.startswith("2.11.0"), torch.__version__
assert "cuda" in info["backends"] and info["archs"] == ["sm_90"], f"not the lent machine's build: {info}"
PY
cuobjdump=$(ls "$root/$VENV"/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump)
elves=$("$cuobjdump" --list-elf "$so")
echo "$elves" | grep -q sm_90 || { echo "no sm_90 cubin in $so: $elves"; exit 1; }
echo "cuobjdump: $(echo "$elves" | wc -l) sm_90 cubins in $so"
start=$(date +%s)
PYTHONPATH=$PWD "$root/$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider "$@" | tail -40
echo "tests against the torch 2.11 build: $(($(date +%s) - start)) s"
