# The two set-up commands: `make demo` and `make test`. Each creates or reuses .venv, installs the
# pinned dependencies, builds the C++ extension, and runs.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BUILD := build
EXTENSION := src/torch_tpu/_C.so

.PHONY: all build demo test test-python test-cpp lint format clean bench

all: build

$(VENV)/.deps: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	TORCH_TPU_SKIP_CMAKE=1 $(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . --config-settings editable_mode=compat
	touch $@

# GoogleTest for the runtime's C++ tests comes from Debian (libgtest-dev).
GTEST_HEADER := /usr/include/gtest/gtest.h
$(GTEST_HEADER):
	@command -v apt-get >/dev/null || (echo "GoogleTest is missing: install libgtest-dev" >&2; false)
	$(SUDO) apt-get install -y -q libgtest-dev >/dev/null 2>&1 || \
	  ($(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q libgtest-dev >/dev/null)

$(BUILD)/build.ninja: $(VENV)/.deps CMakeLists.txt | $(GTEST_HEADER)
	$(VENV)/bin/cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DTORCH_TPU_OUTPUT_DIR=$(abspath src/torch_tpu) > $(BUILD).log 2>&1 || (cat $(BUILD).log; false)

# ninja is incremental; the lock keeps parallel builds in one tree from racing.
build: $(BUILD)/build.ninja
	flock /tmp/torch_tpu_build.lock $(VENV)/bin/ninja -C $(BUILD) -j$$(nproc)

demo: build
	$(PY) examples/demo.py

test-cpp: build
	TORCH_TPU_TEST_PLUGIN=$$($(PY) -c "import torch_tpu._plugin as p; print(p.candidates()[-1][1])") $(BUILD)/runtime_test

# pytest exits 5 when it collects nothing: that is a failure, said out loud.
define run_pytest
	@$(1) $(PY) -m pytest -q $(2); status=$$?; \
	  if [ $$status = 5 ]; then echo "pytest collected no tests" >&2; fi; exit $$status
endef

# The suite runs in worker processes (pytest-xdist), one per core up to 8. On a 2-core machine it
# gains little: files of small op tests took 0.7x one process's time, but the whole suite 0.96x
# (2,349 s against 2,458 s), since one process's model tests already keep both cores busy (XLA's
# threads, torch's). A file whose tests share a module fixture is one xdist_group, so one worker
# runs it whole. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 8 ? n : 8 )))
PYTEST_WORKERS := -n $(TEST_WORKERS) --dist loadgroup

# The suite in the default fused eager mode, then the model and Hugging Face tests a second time
# in strict mode (about a minute more): the two modes share every lowering but not the cuts.
test-python: build
	$(call run_pytest,,$(PYTEST_WORKERS) --durations=10 tests)
	$(call run_pytest,TORCH_TPU_DEFER_AND_FUSE=0,$(PYTEST_WORKERS) tests/test_models.py tests/test_huggingface.py)

test: build lint test-cpp test-python

lint: $(VENV)/.deps
	$(VENV)/bin/ruff check src tests benchmarks examples tools
	$(VENV)/bin/ruff format --check src tests benchmarks examples tools
	$(VENV)/bin/clang-format --dry-run --Werror $$(find csrc tests/cpp -name '*.cc' -o -name '*.h')

format: $(VENV)/.deps
	$(VENV)/bin/ruff format src tests benchmarks examples tools
	$(VENV)/bin/ruff check --fix src tests benchmarks examples tools
	$(VENV)/bin/clang-format -i $$(find csrc tests/cpp -name '*.cc' -o -name '*.h')

clean:
	rm -rf $(BUILD) $(BUILD).log src/torch_tpu/_C*.so

bench: build
	$(PY) benchmarks/bench_ops.py
	$(PY) benchmarks/bench_train.py
	$(PY) benchmarks/bench_precision.py
	$(PY) benchmarks/bench_modes.py
	$(PY) benchmarks/bench_reductions.py
	$(PY) benchmarks/bench_mlp_step.py
	$(PY) benchmarks/bench_generate_compiles.py
	$(PY) benchmarks/bench_distributed.py
