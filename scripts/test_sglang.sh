#!/usr/bin/env bash
# The SGLang plugin against the real sglang 0.5.23: creates (or reuses) .venv-sglang and runs tests/test_sglang.py
# (SGLang's own TokenizerManager and multimodal processors, the plugin on and off in separate processes).
# sglang goes in with --no-deps: importing its tokenizer manager, its multimodal processors and its OpenAI chat
# layer on this CPU machine needs only the pure-Python list below (no sgl-kernel, no flashinfer). transformers
# is held at SGLang's own pin (5.19.0), the version its users run, so the alpha cases test that version's rules.
# This package is installed as users install it, not editable, so SGLang finds the plugin through real
# entry-point metadata.
#   VENV=.venv-sglang  FUSED_INPUT_NORM_FORCE_CPU=1 (as for setup.py)  extra arguments go to pytest
#   WHEEL=dist/fused_input_norm-*.whl  installs that wheel instead of building this tree (CI: step 3's wheel,
#     which saves the build of the extension for this venv, minutes on these 2 cores)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-.venv-sglang}
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac  # absolute or relative to the repository root
export MAX_JOBS=${MAX_JOBS:-2}
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDA_HOME=/usr/local/cuda; fi
pip_install() {
  # The resolver's complaints about sglang's unmet requirements (its GPU packages) are expected.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v -e "^WARNING: Location" -e "^sglang 0.5.23 requires" -e "^ERROR: pip's dependency resolver" || true; }
}

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
start=$(date +%s)
pip_install torch==2.14.1 torchvision==0.29.1 numpy "setuptools>=77,<81" wheel ninja pytest
pip_install transformers==5.19.0 pillow orjson psutil pybase64 requests starlette msgspec pyzmq ipython aiohttp fastapi \
  uvloop dill apache-tvm-ffi==0.1.11 sentencepiece compressed-tensors==0.18.0 gguf openai==2.8.0 partial_json_parser \
  uvicorn einops jsonschema
pip_install --no-deps sglang==0.5.23 xgrammar==0.2.7
echo "sglang environment ready in $(($(date +%s) - start)) s"
start=$(date +%s)
if [ -n "${WHEEL:-}" ]; then
  pip_install --no-deps --force-reinstall "$WHEEL"
else
  pip_install --no-build-isolation --no-deps --force-reinstall .
fi
echo "fused_input_norm installed in $(($(date +%s) - start)) s"
# From outside the source tree, so the installed copy is the one imported.
(cd / && "$VENV/bin/python" -c "import fused_input_norm as f; assert 'site-packages' in f.__file__, f.__file__; print('installed:', f.__file__)")
# bin/pytest, not `python -m pytest`: the latter puts the source tree first on sys.path.
"$VENV/bin/pytest" -q -rs tests/test_sglang.py "$@"
