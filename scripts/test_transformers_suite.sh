#!/usr/bin/env bash
# transformers' own processor tests against the HF adapters: tests/test_transformers_suite.py runs the common
# mixins of transformers' test suite (tests/test_image_processing_common.py, tests/test_video_processing_common.py)
# on transformers' Qwen-VL processors and on FusedHFImageProcessor / FusedHFVideoProcessor, with any call the
# adapters hand back to transformers failing the test. transformers' wheel has no tests; its sdist on PyPI
# has the mixins (not tests/models/): this downloads the sdist of the INSTALLED transformers once into
# .ci-cache/ (git-ignored; cache it in CI) and points the module at it. ~20-40 s of tests.
#
#   bash scripts/test_transformers_suite.sh [pytest args]      (VENV=.venv by default; TRANSFORMERS_SRC: below)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${VENV:-.venv}/bin/python"
VERSION="$("$PY" -c 'import transformers; print(transformers.__version__)')"
SUITE="$PWD/.ci-cache/transformers-$VERSION"

if [ ! -f "$SUITE/tests/test_image_processing_common.py" ]; then
  echo "test_transformers_suite: downloading the sdist of transformers $VERSION (its tests/ only is kept)"
  mkdir -p .ci-cache/sdist "$SUITE"
  # --no-build-isolation: pip reads the sdist's metadata with the venv's setuptools instead of installing a
  # fresh build environment (minutes saved on a cold runner).
  "$PY" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation "transformers==$VERSION" \
    -d .ci-cache/sdist
  tar xzf ".ci-cache/sdist/transformers-$VERSION.tar.gz" -C "$SUITE" --strip-components=1 \
    "transformers-$VERSION/tests"
  if [ ! -f "$SUITE/tests/test_image_processing_common.py" ]; then
    echo "test_transformers_suite: the sdist of transformers $VERSION has no tests/test_image_processing_common.py" >&2
    exit 1
  fi
fi
# The mixins import parameterized (a test-only dependency of transformers').
"$PY" -c 'import parameterized' 2>/dev/null || "$PY" -m pip install --quiet parameterized

FUSED_INPUT_NORM_TRANSFORMERS_TESTS="$SUITE" "$PY" -m pytest -q -p no:cacheprovider -rfEsx \
  tests/test_transformers_suite.py "$@"

# transformers' own tests/models files, when a source checkout at the installed version is given
# (TRANSFORMERS_SRC=<checkout>; e.g. git clone --depth 1 --branch v$VERSION
# https://github.com/huggingface/transformers): run on transformers' processors, then with
# tests/transformers_suite_plugin.py adapting them; every test that passes on the first run must pass on
# the second.
if [ -n "${TRANSFORMERS_SRC:-}" ]; then
  REPO="$PWD"
  # Every served family's image and video processor files that this checkout has.
  FILES=()
  for model in qwen2_vl qwen3_vl clip siglip glm4v gemma3 got_ocr2 internvl llava_onevision idefics3 smolvlm llama4 \
    pixtral gemma4 gemma4_unified llava_next llava_next_video paddleocr_vl cohere_compass lfm2_vl minicpmv4_6 \
    cohere2_vision cosmos3_edge glm5_next blip; do
    for kind in image video; do
      file="tests/models/$model/test_${kind}_processing_$model.py"
      if [ -f "$TRANSFORMERS_SRC/$file" ]; then FILES+=("$file"); fi
    done
  done
  if [ "${#FILES[@]}" = 0 ]; then
    echo "test_transformers_suite: $TRANSFORMERS_SRC has no tests/models/<family>/test_*_processing_*.py" >&2
    exit 1
  fi
  for mode in stock adapters; do
    plugin=()
    [ "$mode" = adapters ] && plugin=(-p transformers_suite_plugin)
    (cd "$TRANSFORMERS_SRC" && PYTHONPATH="$REPO/tests" "$REPO/$PY" -m pytest -q -p no:cacheprovider "${plugin[@]}" \
      --junitxml="$REPO/.ci-cache/transformers-src-$mode.xml" "${FILES[@]}") || true
  done
  "$PY" - "$REPO/.ci-cache/transformers-src-stock.xml" "$REPO/.ci-cache/transformers-src-adapters.xml" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET

def passed(path):
    cases = ET.parse(path).getroot().iter("testcase")
    return {f"{c.get('classname')}::{c.get('name')}" for c in cases if not list(c)}  # no failure/error/skip

stock, adapters = passed(sys.argv[1]), passed(sys.argv[2])
lost = sorted(stock - adapters)
print(f"transformers' own files: {len(stock)} passed on its processors, {len(adapters)} with the adapters")
for module in sorted({t.split("::")[0].rsplit(".", 1)[0] for t in stock | adapters}):  # per file: stock / strict
    count = lambda tests: sum(t.split("::")[0].rsplit(".", 1)[0] == module for t in tests)  # noqa: E731
    print(f"  {module}: {count(stock)} / {count(adapters)}")
for test in lost:
    print(f"  passes on transformers' processors only: {test}")
sys.exit(1 if lost else 0)
PYEOF
fi
