#!/usr/bin/env bash
# Builds the wheel, checks its metadata, installs it (--no-deps) into an empty directory and imports and
# runs it from outside the source tree with no compiler on PATH.
#   VENV=.venv WHEEL_DIR=dist bash scripts/check_wheel.sh   (WHEEL_DIR: keep the wheel there for later steps)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${VENV:-.venv}/bin/python
case $PY in /*) ;; *) PY=$PWD/$PY ;; esac  # VENV absolute or relative to the repository root
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
wheelhouse=${WHEEL_DIR:-$out/wheelhouse}
rm -f "$wheelhouse"/fused_input_norm-*.whl
"$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$wheelhouse" . 2>&1 \
  | { grep -v "^WARNING: Location" || true; }
wheel=$(realpath "$wheelhouse"/fused_input_norm-*.whl)
echo "built $(basename "$wheel") in $(( $(date +%s) - start )) s ($(du -h "$wheel" | cut -f1))"
# The tag must be the Py_LIMITED_API version torch compiles the extension with (cpp_extension's
# min_supported_cpython), and the wheel must ship what setup.py/pyproject.toml promise.
limited=$("$PY" -c "from torch.utils.cpp_extension import min_supported_cpython as v; print(f'cp3{int(v, 16) >> 16 & 0xff}')")
case "$(basename "$wheel")" in *-"$limited"-abi3-*) ;; *) echo "wheel tag is not $limited-abi3"; exit 1 ;; esac
# The listing is read once: `unzip -l | grep -q` under pipefail fails whenever grep exits before unzip
# has written everything (SIGPIPE).
listing=$(unzip -l "$wheel")
for f in fused_input_norm/_C.abi3.so fused_input_norm/py.typed fused_input_norm/vllm_plugin.py dist-info/licenses/LICENSE; do
  grep -q "$f" <<< "$listing" || { echo "the wheel lacks $f"; exit 1; }
done
grep -qx "fused_input_norm = fused_input_norm.vllm_plugin:register" <<< "$(unzip -p "$wheel" '*/entry_points.txt')" \
  || { echo "the wheel does not declare the vllm.general_plugins entry point"; exit 1; }
metadata=$(unzip -p "$wheel" '*/METADATA')
requires=$(grep '^Requires-Dist: torch' <<< "$metadata" || true)
[ -n "$requires" ] || { echo "the wheel does not declare torch"; exit 1; }
# What `pip show` prints: the license (as a PEP 639 expression, which pip < 25.0 leaves out of its License
# line), the author; no Home-page, the project has no public one.
for field in "License-Expression: Apache-2.0" "License-File: LICENSE" "Author: fused_input_norm developers" \
  "Summary: Exact image and video preprocessing for VLM serving"; do
  grep -q "^$field" <<< "$metadata" || { echo "the wheel's METADATA lacks '$field'"; exit 1; }
done
echo "metadata: $requires; $(grep -E '^(License-Expression|Author):' <<< "$metadata" | paste -sd ';' | sed 's/;/; /')"

"$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$out/site" "$wheel"
cd "$out"  # away from the source tree, so only the installed copy can be imported
env -i HOME="$out" PATH=/nonexistent PYTHONPATH="$out/site" "$PY" - "$out/site" <<'PY'
import sys

import torch

import fused_input_norm

assert fused_input_norm.__file__.startswith(sys.argv[1]), fused_input_norm.__file__
x = torch.randint(0, 256, (4, 1176), dtype=torch.uint8)
norm = fused_input_norm.FusedInputNorm([0.5, 0.5, 0.5], [0.5, 0.5, 0.5], 1 / 255)
torch.testing.assert_close(norm(x, torch.float32), x.float() / 127.5 - 1, rtol=1e-6, atol=1e-6)
print("installed wheel imports and runs from", fused_input_norm.__file__, fused_input_norm.build_info())
PY
