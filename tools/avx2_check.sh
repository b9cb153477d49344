#!/usr/bin/env bash
# Runs tests as they would run on an AVX2-only CPU (no AVX-512), on any x86-64 machine: under
# qemu's user-mode emulation of a Haswell, where torch's kernels, XLA's code generation and
# YNNPACK all pick their AVX2 paths. CI runs on processors of both kinds, and a test comparing
# with the CPU's own bf16/f16 kernels can pass on one and fail on the other; this catches that
# before CI does. About 10-50x slower than native, so give it a few files, not the suite. Tests
# that start Python processes of their own (conftest.run_python) run those natively.
# Usage: tools/avx2_check.sh tests/test_reduction.py [more pytest arguments]
# Needs Debian's qemu-user (apt-get install qemu-user) and a built .venv (make build).
set -eu
if ! command -v qemu-x86_64 >/dev/null; then
  echo "qemu-x86_64 is missing: apt-get install qemu-user" >&2
  exit 2
fi
[ $# -gt 0 ] || { echo "usage: $0 TEST_FILE... [pytest arguments]" >&2; exit 2; }
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
# The emulated CPU's capability, as torch sees it, so a run that did not emulate is visible.
TORCH_TPU_CACHE_DIR="$cache" qemu-x86_64 -cpu Haswell .venv/bin/python -c \
  "import torch; print('torch CPU capability under emulation:', torch.backends.cpu.get_cpu_capability())" \
  2> >(grep -v "TCG doesn't support" >&2)
# One process: pytest-xdist's workers would start outside the emulator.
TORCH_TPU_CACHE_DIR="$cache" qemu-x86_64 -cpu Haswell .venv/bin/python -m pytest -q -p no:xdist \
  -p no:cacheprovider "$@" 2> >(grep -v "TCG doesn't support" >&2)
