#!/usr/bin/env bash
# Builds torch_tpu with the machine's own python3 and torch (2.11 or newer) and checks it on
# another PJRT plugin: XLA's CUDA plugin from jax-cuda13-pjrt by default, or TORCH_TPU_PJRT_PLUGIN.
# Usage: tools/device_check.sh PJRT_INCLUDE_DIR OUT_DIR [test files...]
# (PJRT_INCLUDE_DIR holds pjrt_c_api.h: copy it from the xla-cpu-pjrt wheel.)
set -u
include=$(realpath "$1")
out=$(realpath "$2")
shift 2
python=${PYTHON:-python3}
started=$(date +%s)
elapsed() { echo "$(($(date +%s) - started)) s"; }

cmake -S . -B build-device -G Ninja -DPython3_EXECUTABLE="$(command -v "$python")" \
  -DPJRT_INCLUDE_DIR="$include" -DTORCH_TPU_OUTPUT_DIR="$PWD/src/torch_tpu" \
  -DTORCH_TPU_BUILD_TESTS=OFF >"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
ninja -C build-device -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -m3 -B2 -A12 'error' "$out/build.log"; exit 1; }
echo "built in $(elapsed)"

if [ -z "${TORCH_TPU_PJRT_PLUGIN:-}" ]; then
  TORCH_TPU_PJRT_PLUGIN=$("$python" -c "import jax_plugins.xla_cuda13 as p, os; print(os.path.join(os.path.dirname(p.__file__), 'xla_cuda_plugin.so'))" 2>/dev/null)
  [ -f "$TORCH_TPU_PJRT_PLUGIN" ] || TORCH_TPU_PJRT_PLUGIN=$(find / -name 'xla_cuda_plugin.so' 2>/dev/null | head -1)
fi
export TORCH_TPU_PJRT_PLUGIN PYTHONPATH="$PWD/src:$PWD/tests" PYTHONUNBUFFERED=1
export TORCH_TPU_CACHE_DIR="$out/../torch_tpu_cache"
echo "plugin: $TORCH_TPU_PJRT_PLUGIN"

timeout 240 "$python" tools/device_smoke.py "$out/smoke.json" 2>&1 | tee "$out/smoke.log"
echo "smoke done at $(elapsed)"
if [ $# -gt 0 ]; then
  timeout "${TEST_SECONDS:-240}" "$python" -m pytest -q -p no:cacheprovider --junitxml="$out/junit.xml" \
    -o junit_family=xunit1 "$@" 2>&1 | tee "$out/pytest.log" | grep -E "passed|failed|error|FAILED|ERROR" | tail -60
  echo "tests done at $(elapsed)"
fi
