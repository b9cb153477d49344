"""The tpu device: torch.tpu, torch.accelerator, generated methods, several devices, no plugin."""

from __future__ import annotations

import os
import resource
import time

import pytest
import torch
from conftest import assert_close, make, run_python

import torch_tpu


def test_torch_tpu_module():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(0)
    torch.tpu.synchronize()
    assert torch_tpu.platform().startswith("cpu")


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == torch.tpu.device_count()
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    x = make((1000,)).to("tpu")
    torch.accelerator.synchronize()
    assert torch.accelerator.memory_allocated() >= x.numel() * 4
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated()


def test_generated_methods():
    cpu = make((3, 4))
    x = cpu.tpu()
    assert x.is_tpu and x.device == torch.device("tpu:0")
    assert_close(x, cpu)
    module = torch.nn.Linear(4, 2).tpu()
    assert module.weight.device.type == "tpu" and module.bias.device.type == "tpu"
    storage = x.untyped_storage()
    assert storage.is_tpu and storage.device.type == "tpu"
    back = storage.cpu()
    assert back.device.type == "cpu"
    assert torch.tensor([], dtype=torch.float32).set_(back).view(3, 4).equal(cpu)


def test_memory_stats_follow_allocations():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.empty(1 << 20, device="tpu")
    assert torch.tpu.memory_allocated() - before == 4 << 20
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated()
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    del x
    assert torch.tpu.memory_allocated() == before
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == before
    torch.tpu.empty_cache()
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_freed_device_memory_is_reused_without_page_faults_until_empty_cache():
    """The CPU plugin's buffers are malloc blocks (csrc/runtime/host_heap.h): a loop that frees and
    allocates 32 MiB of results per step reuses the kept heap instead of faulting fresh pages in
    every step, and empty_cache gives kept heap back to the OS.

    The results are allocated by the plugin's worker threads, each from a malloc arena of its own,
    and which thread takes which result varies from step to step: an arena grows (faulting fresh
    pages) whenever its share reaches a new high, so the heaps settle over a few tens of steps,
    not at once. Hence windows of 10 steps, one of which must fault less than a tenth of a step's
    fresh pages; a heap that is not kept faults them in every window."""
    x = torch.randn(1 << 20).to("tpu")  # 4 MiB

    def step():
        results = [x + i for i in range(8)]
        torch.tpu.synchronize()
        return results

    for _ in range(10):  # the heap settles into the step's block sizes
        step()
    windows = []
    while len(windows) < 4 and (not windows or windows[-1] >= 8192):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            step()
        windows.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    assert windows[-1] < 8192, f"page faults in windows of 10 steps: {windows}; fresh pages every step would be 81920"
    # Buffers uploaded from this thread are blocks of the main heap, which malloc_trim releases
    # whole (worker threads' heaps give back their free tops only on their own frees).
    uploads = [x.cpu().to("tpu") for _ in range(16)]
    torch.tpu.synchronize()
    del uploads
    kept = _resident_bytes()
    torch.tpu.empty_cache()
    assert _resident_bytes() < kept - (32 << 20)


def test_pinned_memory():
    host = make((64,))
    pinned = host.pin_memory()
    assert pinned.is_pinned() and not host.is_pinned()
    assert_close(pinned.to("tpu", non_blocking=True), host)


def test_rng_functions_exist_and_roundtrip():
    torch.tpu.manual_seed(7)
    torch.tpu.manual_seed_all(7)
    state = torch.tpu.get_rng_state()
    assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 7


def test_bad_device_index():
    count = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match=rf"Invalid device index tpu:{count}.*TORCH_TPU_NUM_DEVICES"):
        torch.empty(2, device=f"tpu:{count}")
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.tpu.set_device(count + 3)
    assert torch.tpu.current_device() == 0


def test_device_context_manager_and_several_devices():
    result = run_python(
        """
import torch, torch_tpu
assert torch.tpu.device_count() == 3, torch.tpu.device_count()
a = torch.arange(6.0).to("tpu:2")
assert a.device == torch.device("tpu:2")
b = a.to("tpu:1")                       # cross-device copy
assert b.device == torch.device("tpu:1") and b.cpu().equal(torch.arange(6.0))
c = (b + b).to("tpu:0")
assert c.device.index == 0 and c.cpu().equal(2 * torch.arange(6.0))
with torch.tpu.device(1):
    assert torch.tpu.current_device() == 1
    d = torch.empty(3, device="tpu")
    assert d.device.index == 1, d.device
assert torch.tpu.current_device() == 0
try:
    a + b
except RuntimeError as e:
    assert "same device" in str(e), e
else:
    raise AssertionError("mixing devices must fail")
print("ok")
""",
        TORCH_TPU_NUM_DEVICES="3",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_autoload_through_import_torch():
    result = run_python(
        "import sys, torch\nx = torch.arange(4.0).to('tpu')\nprint('torch_tpu' in sys.modules, (x + 1).cpu().tolist())"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "[1.0,", "2.0,", "3.0,", "4.0]"]


def test_import_without_plugin_says_what_was_tried():
    result = run_python(
        """
import torch, torch_tpu
assert not torch.tpu.is_available()
assert torch.tpu.device_count() == 0
try:
    torch.empty(2, device="tpu")
except RuntimeError as e:
    print(str(e))
else:
    raise AssertionError("device use without a plugin must fail")
""",
        TORCH_TPU_PJRT_PLUGIN="/nonexistent/libmissing_pjrt.so",
    )
    assert result.returncode == 0, result.stderr
    assert "no usable PJRT plugin" in result.stdout
    assert "/nonexistent/libmissing_pjrt.so" in result.stdout
    assert "TORCH_TPU_PJRT_PLUGIN" in result.stdout


def test_info_tool():
    result = run_python("import runpy; runpy.run_module('torch_tpu.info', run_name='__main__')")
    assert result.returncode == 0, result.stderr
    for fragment in ("platform: cpu", "xla_cpu_pjrt.so", "PJRT API version: plugin 0.", "tpu:0", "cache directory"):
        assert fragment in result.stdout, result.stdout


def test_events_wait_for_recorded_work_and_time_it():
    a = make((1536, 1536)).to("tpu")
    (a @ a).cpu()  # compile first
    start, end = torch.Event(device="tpu", enable_timing=True), torch.Event(device="tpu", enable_timing=True)
    start.record()
    c = a @ a
    end.record()
    assert not end.query()  # the matmul is still running: recording did not wait
    end.synchronize()
    assert end.query() and start.query()
    wall = time.perf_counter()
    c2 = a @ a
    torch.tpu.synchronize()
    wall = (time.perf_counter() - wall) * 1e3
    elapsed = start.elapsed_time(end)
    assert 0 < elapsed < 20 * wall + 50, (elapsed, wall)
    assert_close(c, c2.cpu())


def test_module_to_moves_parameters_in_place_and_keeps_ties():
    module = torch.nn.Module()
    module.a, module.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    module.b.weight = module.a.weight
    weight = module.a.weight
    module.to("tpu")
    assert module.a.weight is weight and module.b.weight is weight  # as on CUDA
    assert weight.device.type == "tpu"
    module.to("cpu")
    assert module.b.weight is weight and weight.device.type == "cpu"


def test_stream_query_and_tpu_event():
    a = make((1536, 1536)).to("tpu")
    (a @ a).cpu()
    stream = torch.tpu.current_stream()
    c = a @ a
    assert not stream.query()  # the matmul is still running
    stream.synchronize()
    assert stream.query()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    c = a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0
    assert_close(c, a.cpu() @ a.cpu(), rtol=1e-4, atol=1e-3)


def test_synchronize_and_events_wait_for_work_whose_results_were_freed():
    # `model(x); torch.tpu.synchronize()` and an event recorded after it: CUDA waits for the work
    # whether or not its results are still held. Strict mode, where dropped work still runs (fused
    # mode never runs work whose results nobody holds).
    with torch_tpu.execution_mode("strict"):
        a = make((1536, 1536)).to("tpu")
        (a @ a).cpu()

        def timed(keep):
            kept = []
            wall = time.perf_counter()
            for _ in range(3):
                c = a @ a
                if keep:
                    kept.append(c)
                del c
            torch.tpu.synchronize()
            return time.perf_counter() - wall

        held, freed = timed(keep=True), timed(keep=False)
        assert freed > 0.3 * held, (freed, held)  # it returned at once when the results were freed

        start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            a @ a
        end.record()
        assert not end.query()  # the products still run
        end.synchronize()
        assert start.elapsed_time(end) > 0.3 * held * 1e3
        assert torch.tpu.current_stream().query()


def test_elapsed_time_of_a_start_event_recorded_behind_running_work():
    # Each event's completion is stamped when its work finishes, not when the host first looks:
    # here the host looks at `start` only after `end` has been waited for.
    a = make((1536, 1536)).to("tpu")
    (a @ a).cpu()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    before = a @ a
    start.record()
    assert not start.query()  # `before` still runs
    after = a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0
    assert_close(after, before.cpu())


def test_a_script_that_ends_right_after_a_backward_exits_cleanly():
    # Autograd's device thread drops its finished task after backward() returns; at interpreter
    # shutdown that used to abort the process now and then (about one run in five).
    code = """
import torch, torch_tpu
x = torch.randn(64, 10, device="tpu", requires_grad=True)
y = torch.randint(0, 10, (64,), device="tpu")
for _ in range(20):
    torch.nn.functional.cross_entropy(x * 1.0, y).backward()
"""
    for _ in range(6):
        result = run_python(code)
        assert result.returncode == 0, result.stderr[-2000:]
