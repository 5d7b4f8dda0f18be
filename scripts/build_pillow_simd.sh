#!/usr/bin/env bash
# Builds pillow-simd (the fastest CPU resize a user would pick, not exact: see PERF_NOTES.md) into its own
# virtual environment, .venv-pillow-simd (gitignored), for scripts/bench_pillow_simd.py.
#   PILLOW_SIMD_SPEC=pillow-simd==12.1.1.post0   CC="cc -mavx2" (as pillow-simd's README builds it)
#   MAIN_VENV=.venv  the venv with torch and this project (its site-packages are appended to the new venv's
#                    path by a .pth file, after pillow-simd's own PIL, so one process loads both)
# The build needs libjpeg and zlib headers (apt-get install libjpeg-dev zlib1g-dev) and takes ~1-3 min on
# 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv-pillow-simd}
MAIN_VENV=${MAIN_VENV:-.venv}
SPEC=${PILLOW_SIMD_SPEC:-pillow-simd==12.1.1.post0}
export CC=${CC:-cc -mavx2}
for header in /usr/include/jpeglib.h /usr/include/zlib.h; do
  if [ ! -e "$header" ] && [ ! -e "/usr/include/$(uname -m)-linux-gnu/$(basename "$header")" ]; then
    echo "build_pillow_simd: $header is missing: apt-get install libjpeg-dev zlib1g-dev" >&2
    exit 1
  fi
done
main_python="$MAIN_VENV/bin/python"
if [ ! -x "$main_python" ]; then
  echo "build_pillow_simd: $main_python not found (run scripts/setup_env.sh first, or set MAIN_VENV)" >&2
  exit 1
fi
# The same interpreter as the main venv, so its torch and numpy load in this one.
base=$("$main_python" -c "import sys; print(sys.base_prefix)")
version=$("$main_python" -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
if [ ! -x "$VENV/bin/python" ]; then
  "$base/bin/python$version" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q "setuptools>=77" wheel pybind11
start=$(date +%s)
echo "build_pillow_simd: building $SPEC with CC='$CC' (1-3 min)"
"$VENV/bin/python" -m pip install -q --no-binary pillow-simd --no-build-isolation --force-reinstall "$SPEC"
echo "build_pillow_simd: built in $(($(date +%s) - start)) s"
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
main_site=$("$main_python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# Appended after this venv's own site-packages: pillow-simd's PIL wins, torch/numpy come from the main venv.
printf '%s\n%s\n' "$(realpath "$main_site")" "$(pwd)" > "$site/zz_main_venv.pth"
"$VENV/bin/python" - <<'PY'
import PIL
from PIL import Image, features

print(f"build_pillow_simd: PIL {PIL.__version__} from {PIL.__file__}; jpeg: {features.check('jpg')}")
PY
