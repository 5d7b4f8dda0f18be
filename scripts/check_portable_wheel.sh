#!/usr/bin/env bash
# One wheel, several torch releases: takes one wheel built against torch 2.14.1 (CUDA), checks with nm -D
# that its extension imports only torch's stable C shims (no mangled c10::/at::/torch:: symbol) and needs no
# libtorch_cuda or CUDA runtime library, then installs that same file --no-deps next to torch 2.11.0 (the
# floor), 2.12.0, 2.13.0 (CPU-only), 2.14.1 (CUDA 13.0) and 2.15.0 (CUDA 13.2) and, from outside the source
# tree, runs the op tests and the torch.compile/export tests (CPU) in each.
#   WHEEL=path/to/fused_input_norm-*.whl   (default: build one with .venv, which must hold torch 2.14.1)
# The venvs are .venv-torch211 (2.11.0: scripts/check_torch_floor.sh's), .venv-torch212 (2.12.0), .venv-cpu
# (2.13.0), .venv (2.14.1) and .venv-torch215 (2.15.0), created when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet_pip() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }

if [ -z "${WHEEL:-}" ]; then
  start=$(date +%s)
  quiet_pip .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
    -w "$work/wheelhouse" .
  WHEEL=$(ls "$work"/wheelhouse/fused_input_norm-*.whl)
  echo "built $(basename "$WHEEL") in $(($(date +%s) - start)) s"
fi
echo "wheel: $(basename "$WHEEL"), $(du -k "$WHEEL" | cut -f1) KiB; $(unzip -p "$WHEEL" '*/METADATA' | grep '^Requires-Dist: torch')"

# What the extension imports from torch: C shims only, and only libraries a CPU-only torch has.
unzip -q -o "$WHEEL" 'fused_input_norm/_C*.so' -d "$work/unpacked"
so=$(ls "$work"/unpacked/fused_input_norm/_C*.so)
mangled=$(nm -D --undefined-only "$so" | awk '{print $NF}' | c++filt | grep -E '\b(c10|at|torch)::' || true)
if [ -n "$mangled" ]; then echo "the extension imports torch C++ symbols:"; echo "$mangled"; exit 1; fi
shims=$(nm -D --undefined-only "$so" | awk '{print $NF}' | grep -cE '^(aoti_torch|torch)_')
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "nm -D: no c10::/at::/torch:: imports; $shims torch C shims (aoti_torch_*/torch_*); needs: $needed"
if echo "$needed" | grep -qE 'libtorch_cuda|libc10|libcudart|libtorch_python'; then
  echo "the extension needs a library a CPU-only torch lacks: $needed"
  exit 1
fi

# The tests run from a copy, so that only the installed wheel can be imported.
mkdir "$work/run"
cp -r tests pyproject.toml "$work/run/"

# venv, torch pin, extra pip arguments. /etc/xdg/pip caps torch at 2.14.1 on this machine; with
# PIP_CONFIG_FILE=/dev/null pip reads no config file, for the 2.15.0 venv only.
for spec in ".venv-torch211 torch==2.11.0" ".venv-torch212 torch==2.12.0" ".venv-cpu torch==2.13.0" ".venv torch==2.14.1" \
  ".venv-torch215 torch==2.15.0 PIP_CONFIG_FILE=/dev/null"; do
  read -r venv torch_pin pip_env <<< "$spec"
  start=$(date +%s)
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  quiet_pip env ${pip_env:-} "$venv/bin/python" -m pip install -q --disable-pip-version-check "$torch_pin" numpy \
    pytest pytest-xdist hypothesis expecttest
  site="$work/site-$(basename "$venv")"
  quiet_pip "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --target "$site" "$WHEEL"
  (
    cd "$work/run"
    PYTHONPATH="$site" "$root/$venv/bin/python" - "$site" <<'PY'
import sys

import torch

import fused_input_norm

assert fused_input_norm.__file__.startswith(sys.argv[1]), fused_input_norm.__file__
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}): {fused_input_norm.build_info()}")
PY
    if ! PYTHONPATH="$site" "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 -m "not slow" \
      tests/test_ops.py tests/test_validation.py tests/test_layouts.py tests/test_compile_export.py > pytest.log 2>&1; then
      cat pytest.log
      exit 1
    fi
    tail -1 pytest.log
  )
  echo "  ($(($(date +%s) - start)) s)"
done
echo "one wheel passed on torch 2.11.0, 2.12.0, 2.13.0 (CPU), 2.14.1 (CUDA 13.0) and 2.15.0 (CUDA 13.2)"
