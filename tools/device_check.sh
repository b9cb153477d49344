#!/usr/bin/env bash
# Builds torch_tpu with the machine's own python3 and torch (2.11 or newer) and checks it on
# another PJRT plugin: XLA's CUDA plugin from jax-cuda13-pjrt by default, or TORCH_TPU_PJRT_PLUGIN.
# Usage: [BENCH_ARGS="--rounds 2"] tools/device_check.sh PJRT_INCLUDE_DIR OUT_DIR [test files...]
# (PJRT_INCLUDE_DIR holds pjrt_c_api.h: copy it from the xla-cpu-pjrt wheel.) One device session's
# run, about 8 minutes on an H100 (build 25 s, smoke 20 s, bench about 4 minutes):
#   mkdir -p .devinc && cp .venv/lib/python3.11/site-packages/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h .devinc/
#   echo /.devinc/ >> .git/info/exclude   # then, on the device, carrying .devinc:
#   SMOKE_SECONDS=120 BENCH_SECONDS=300 TEST_SECONDS=120 BENCH_ARGS="--rounds 2 --repeats 5" \
#     tools/device_check.sh .devinc $OUT tests/test_precision.py tests/test_attention.py tests/test_optim.py
# Each stage has a time limit and writes its log to OUT_DIR as it goes, so a stage that overruns
# still leaves the earlier stages' results: the smoke checks, then benchmarks/bench_modes.py (when
# BENCH_ARGS is set; its native baseline is the CPU: a CUDA backward fails in a process that has
# imported torch_tpu, see README), then the given tests.
set -u
include=$(realpath "$1")
out=$(realpath "$2")
shift 2
python=${PYTHON:-python3}
started=$(date +%s)
elapsed() { echo "$(($(date +%s) - started)) s"; }

# The system's g++ matches the libstdc++ that python and torch load. A newer toolchain earlier in
# PATH (the GPU image's /opt/gcc) puts its own libstdc++ pieces in the extension, and its first
# ostream write of a number crashed against the process's locale.
cxx=${TORCH_TPU_CXX:-$( [ -x /usr/bin/g++ ] && echo /usr/bin/g++ || command -v g++ )}
echo "compiler: $cxx ($("$cxx" -dumpfullversion))"
cmake -S . -B build-device -G Ninja -DPython3_EXECUTABLE="$(command -v "$python")" -DCMAKE_CXX_COMPILER="$cxx" \
  -DPJRT_INCLUDE_DIR="$include" -DTORCH_TPU_OUTPUT_DIR="$PWD/src/torch_tpu" \
  -DTORCH_TPU_BUILD_TESTS=OFF >"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
ninja -C build-device -k 0 -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -A3 'error:' "$out/build.log" | head -80; exit 1; }
echo "built in $(elapsed)"
# Installed (editable) for its entry points: torch.compile's backend="tpu" is found through one.
TORCH_TPU_SKIP_CMAKE=1 "$python" -m pip install -q --no-deps --no-build-isolation --no-index -e . \
  --config-settings editable_mode=compat >"$out/pip.log" 2>&1 || tail -5 "$out/pip.log"

if [ -z "${TORCH_TPU_PJRT_PLUGIN:-}" ]; then
  TORCH_TPU_PJRT_PLUGIN=$("$python" -c "import jax_plugins.xla_cuda13 as p, os; print(os.path.join(os.path.dirname(p.__file__), 'xla_cuda_plugin.so'))" 2>/dev/null)
  [ -f "$TORCH_TPU_PJRT_PLUGIN" ] || TORCH_TPU_PJRT_PLUGIN=$(find / -name 'xla_cuda_plugin.so' 2>/dev/null | head -1)
fi
export TORCH_TPU_PJRT_PLUGIN PYTHONPATH="$PWD/src:$PWD/tests" PYTHONUNBUFFERED=1
export TORCH_TPU_CACHE_DIR="$out/../torch_tpu_cache"
echo "plugin: $TORCH_TPU_PJRT_PLUGIN"

timeout "${SMOKE_SECONDS:-240}" "$python" tools/device_smoke.py "$out/smoke.json" 2>&1 | tee "$out/smoke.log"
echo "smoke done at $(elapsed)"
if [ -n "${BENCH_ARGS:-}" ]; then
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
  timeout "${BENCH_SECONDS:-240}" "$python" benchmarks/bench_modes.py --skip-native-compiled \
    $BENCH_ARGS 2>&1 | grep --line-buffered -v Warning | tee "$out/bench.log"
  echo "bench done at $(elapsed)"
fi
if [ $# -gt 0 ]; then
  timeout "${TEST_SECONDS:-240}" "$python" -m pytest -q -p no:cacheprovider --junitxml="$out/junit.xml" \
    -o junit_family=xunit1 "$@" 2>&1 | tee "$out/pytest.log" | grep -E "passed|failed|error|FAILED|ERROR" | tail -60
  echo "tests done at $(elapsed)"
fi
