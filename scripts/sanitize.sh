#!/usr/bin/env bash
# Builds the CPU extension with AddressSanitizer + UndefinedBehaviorSanitizer and runs the op tests under
# them. Fails if the sanitizers are not really in the build or cannot catch a planted bug.
#   VENV=.venv-cpu TORCH_SPEC=torch==2.13.0 (the CPU torch: smaller, and no CUDA code to instrument)
# Leaves the sanitized build in place: rebuild (scripts/setup_env.sh) to get the normal one back.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export VENV=${VENV:-.venv-cpu} TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
EXTRAS="pytest hypothesis expecttest" FUSED_INPUT_NORM_SANITIZE=1 bash scripts/setup_env.sh

libasan=$(g++ -print-file-name=libasan.so)
libstdcxx=$(g++ -print-file-name=libstdc++.so)
[ -e "$libasan" ] || { echo "no libasan.so for $(g++ --version | head -1): install libasan (gcc's)"; exit 1; }
so=$(ls fused_input_norm/_C*.so)
grep -q libasan <<< "$(ldd "$so")" || { echo "$so is not linked against libasan: the build is not sanitized"; exit 1; }
grep -q libubsan <<< "$(ldd "$so")" || { echo "$so is not linked against libubsan: the build is not sanitized"; exit 1; }

# The toolchain must catch what we ask it to: a planted heap overflow and a planted signed overflow.
tmp=$(mktemp -d)
printf '#include <cstdlib>\nint main(int c, char**) { int* p = (int*)malloc(4 * sizeof(int)); int r = p[c + 3]; free(p); return r; }\n' > "$tmp/heap.cpp"
printf '#include <climits>\nint main(int c, char**) { int x = INT_MAX - 1 + c; return x + c; }\n' > "$tmp/ub.cpp"
for bug in heap ub; do
  g++ -fsanitize=address,undefined -fno-sanitize-recover=undefined "$tmp/$bug.cpp" -o "$tmp/$bug"
  if "$tmp/$bug" 2>"$tmp/$bug.log"; then echo "the sanitizers missed the planted $bug bug"; exit 1; fi
  grep -qE "AddressSanitizer|runtime error" "$tmp/$bug.log" || { cat "$tmp/$bug.log"; exit 1; }
done
echo "sanitizers catch planted bugs: heap overflow, signed overflow"

# Python itself is not instrumented: ASan must be loaded first (and libstdc++ with it, or its __cxa_throw
# interceptor finds no real function when a C++ exception is thrown), and CPython's intentional leaks ignored.
export LD_PRELOAD="$libasan $libstdcxx" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# torch.compile tests are left out: they compile and load inductor's own (uninstrumented) C++.
# --capture=sys: a sanitizer report goes to fd 2, which pytest's default capture would swallow.
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --capture=sys tests/test_ops.py tests/test_validation.py \
  tests/test_properties.py tests/test_module.py -k "not compile"
