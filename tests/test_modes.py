"""Execution modes: fused eager (the default), strict and debug; metrics."""

from __future__ import annotations

import io
import json
import statistics
import time

import pytest
import torch
from conftest import assert_close, make, run_python

import torch_tpu
from torch_tpu import ExecutionMode


@pytest.mark.execution_mode("strict")
def test_strict_runs_op_by_op():
    cpu = make((5, 6))
    x = cpu.to("tpu")
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    y = x + 1
    z = y + x
    # Each op is its own program, launched at once; nothing waits for a later sync.
    assert torch_tpu.metrics.snapshot()["executions"] == 2
    assert torch_tpu._C._pending_count() == 0
    assert torch_tpu.metrics.snapshot()["transfers_to_host"] == 0
    assert_close(z, cpu + 1 + cpu)
    assert torch_tpu.metrics.snapshot()["transfers_to_host"] == 1


@pytest.mark.execution_mode("strict")
def test_repeated_scalar_arguments_are_copied_to_the_device_once_and_never_mixed_up():
    cpu = make((4, 5))
    x = cpu.to("tpu")
    # Values no other test passes, in two dtypes: the first use of each copies it.
    values = [0.123456 + i for i in range(3)]
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    for _ in range(3):
        for v in values:
            assert_close(x * v, cpu * v)
            assert_close(x.double() * v, cpu.double() * v)
            assert_close(x.long() + int(v * 1000), cpu.long() + int(v * 1000))
    assert torch_tpu.metrics.snapshot()["scalar_uploads"] == 3 * len(values)
    # empty_cache drops the kept copies; the next use copies again, with the right value.
    torch.tpu.empty_cache()
    torch_tpu.metrics.reset()
    assert_close(x * values[1], cpu * values[1])
    assert torch_tpu.metrics.snapshot()["scalar_uploads"] == 1
    # Kept copies are bounded: a stream of new values keeps working past the bound.
    for i in range(600):
        v = 1.0 + i / 1024
        if i % 100 == 0:
            assert_close(x * v, cpu * v)
        else:
            y = x * v  # noqa: F841 - each launch copies its new value
    assert_close(x * values[0], cpu * values[0])


def test_execution_mode_is_a_setter_and_a_context_manager():
    ambient = torch_tpu.execution_mode()
    with torch_tpu.execution_mode("debug") as mode:
        assert mode is ExecutionMode.DEBUG
        assert torch_tpu.execution_mode() is ExecutionMode.DEBUG
        with torch_tpu.execution_mode(ExecutionMode.STRICT):
            assert torch_tpu.execution_mode() is ExecutionMode.STRICT
        assert torch_tpu.execution_mode() is ExecutionMode.DEBUG
    assert torch_tpu.execution_mode() is ambient
    torch_tpu.execution_mode("debug")
    try:
        assert torch_tpu.execution_mode() is ExecutionMode.DEBUG
    finally:
        torch_tpu.execution_mode(ambient)
    with pytest.raises(ValueError, match="unknown execution mode 'fast'"):
        torch_tpu.execution_mode("fast")


def test_debug_mode_from_the_environment_raises_at_the_failing_line():
    code = """
import resource, traceback
resource.setrlimit(resource.RLIMIT_AS, (32 << 30, 32 << 30))
import torch, torch_tpu
print(torch_tpu.execution_mode().name)
x = torch.arange(6.0).to("tpu")
print((x + 2).cpu().tolist())
huge = torch.empty(2**38, device="tpu")
try:
    y = huge + 1  # FAILING LINE
except torch.OutOfMemoryError as e:
    print(traceback.extract_tb(e.__traceback__)[-1].lineno)
"""
    result = run_python(code, TORCH_TPU_LAUNCH_BLOCKING="1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "DEBUG"
    assert lines[1] == "[2.0, 3.0, 4.0, 5.0, 6.0, 7.0]"
    failing_line = 1 + code.split("\n").index(next(line for line in code.split("\n") if "FAILING" in line))
    assert lines[2] == str(failing_line)


def test_fused_eager_records_ops_and_runs_them_as_one_program():
    # The hook for DeferAndFuse: the same lowerings, recorded as pending graph values.
    x = make((4, 3)).to("tpu")
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    with torch_tpu.execution_mode("defer_and_fuse"):
        y = x + 1
        z = y + 2
        w = z + y
        assert torch_tpu._C._pending_count() == 3
        assert torch_tpu.metrics.snapshot()["executions"] == 0
        assert_close(w, (x.cpu() + 1) * 2 + 2)
    figures = torch_tpu.metrics.snapshot()
    assert figures["executions"] == 1
    assert figures["sync_reasons"] == {"host read": 1}


def test_metrics_snapshot_report_reset():
    torch_tpu.metrics.reset()
    x = make((8,)).to("tpu")
    (x + 1).cpu()
    figures = torch_tpu.metrics.snapshot()
    for key in (
        "compiles",
        "memory_cache_hits",
        "disk_cache_hits",
        "executions",
        "transfers_to_device",
        "transfers_to_host",
        "cpu_fallbacks",
    ):
        assert isinstance(figures[key], int), key
    assert figures["transfers_to_device"] == 1 and figures["transfers_to_host"] == 1
    assert figures["executions"] == 1
    assert figures["compiles"] + figures["memory_cache_hits"] + figures["disk_cache_hits"] == 1
    out = io.StringIO()
    text = torch_tpu.metrics.report(file=out)
    assert out.getvalue().strip() == text.strip()
    for row in (
        "compiles",
        "compile time",
        "memory cache hits",
        "disk cache hits",
        "executions",
        "transfers to device",
        "transfers to host",
        "cpu fallbacks",
        # Why programs ran: each op in strict mode, the read in fused mode.
        "sync: op" if torch_tpu.execution_mode() is ExecutionMode.STRICT else "sync: host read",
    ):
        assert row in text, row
    json.dumps(figures)  # plain data
    torch_tpu.metrics.reset()
    assert all(v == 0 for k, v in torch_tpu.metrics.snapshot().items() if isinstance(v, (int, float)))


def launch_and_read_times(a):
    """Median seconds to launch a @ a + 1, and then to read one element of it."""
    (a @ a + 1)[0, 0].item()  # compiles every program first
    launches, waits = [], []
    for _ in range(3):
        start = time.perf_counter()
        c = a @ a + 1
        launched = time.perf_counter()
        c[0, 0].item()
        launches.append(launched - start)
        waits.append(time.perf_counter() - launched)
    return statistics.median(launches), statistics.median(waits)


def test_strict_mode_launches_without_waiting():
    # A large matmul takes far longer to run than to launch; only the host read waits for it.
    launch, wait = launch_and_read_times(torch.randn(1536, 1536).to("tpu"))
    assert launch * 5 < wait, (launch, wait)


def test_debug_mode_waits_for_each_op():
    a = torch.randn(1536, 1536).to("tpu")
    with torch_tpu.execution_mode("debug"):
        launch, wait = launch_and_read_times(a)
    # The work happened before the op returned: the read only copies one element.
    assert wait * 5 < launch, (launch, wait)
