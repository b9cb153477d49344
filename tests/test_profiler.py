"""torch.profiler on tpu: program executions, transfers, compiles and disk-cache loads recorded as
tpu activity, in key_averages() and in the Chrome trace."""

from __future__ import annotations

import json
import os

import pytest
import torch
from conftest import TPU, run_python
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

import torch_tpu

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def make_training():
    """A small model on tpu, its optimizer and a fixed batch (on the host)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(TPU)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = (torch.randn(32, 8), torch.randn(32, 4))
    return model, optimizer, batch


def train_step(model, optimizer, batch) -> torch.Tensor:
    inputs, targets = (t.to(TPU) for t in batch)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.cpu()


def profiled(activities, work):
    """Runs `work` under the profiler; returns the profile and the change of each metric."""
    before = torch_tpu.metrics.snapshot()
    with profile(activities=activities) as prof:
        work()
    after = torch_tpu.metrics.snapshot()
    return prof, {key: after[key] - before[key] for key in ("executions", "transfers_to_device", "transfers_to_host")}


def tpu_events(prof, prefix=""):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1 and e.name.startswith(prefix)]


def test_training_step_records_each_execution_and_transfer_as_tpu_events():
    model, optimizer, batch = make_training()
    train_step(model, optimizer, batch)  # compiles outside the profile
    prof, delta = profiled(BOTH, lambda: train_step(model, optimizer, batch))

    executions = tpu_events(prof, "program ")
    assert delta["executions"] > 0
    assert len(executions) == delta["executions"]
    uploads = tpu_events(prof, "copy host to tpu")
    uploads = [e for e in uploads if e.name == "copy host to tpu"]  # not the scalar uploads
    downloads = tpu_events(prof, "copy tpu to host")
    # The batch's two tensors and the backward's seed (a small fill is an upload, not a program).
    assert len(uploads) == delta["transfers_to_device"] == 3
    assert len(downloads) == delta["transfers_to_host"] == 1
    for event in tpu_events(prof):
        assert event.device_index == 0
        assert event.time_range.elapsed_us() > 0, event.name


@pytest.mark.execution_mode("strict")  # each op launches its own program, linked to the op
def test_key_averages_show_tpu_time_per_program_and_per_op():
    model, optimizer, batch = make_training()
    train_step(model, optimizer, batch)
    prof, _ = profiled(BOTH, lambda: train_step(model, optimizer, batch))

    averages = prof.key_averages()
    programs = [a for a in averages if a.key.startswith("program ")]
    assert programs
    for average in programs:
        assert average.device_type == DeviceType.PrivateUse1
        assert average.self_device_time_total > 0
    # Each execution is linked to the aten op that launched it, which then shows tpu time.
    assert any(a.key == "aten::addmm" and a.device_time_total > 0 for a in averages)
    assert "Self TPU" in averages.table(sort_by="self_device_time_total", row_limit=5)


def test_chrome_trace_holds_the_tpu_events(tmp_path):
    model, optimizer, batch = make_training()
    train_step(model, optimizer, batch)
    prof, delta = profiled(BOTH, lambda: train_step(model, optimizer, batch))
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))

    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert len(kernels) == delta["executions"]
    assert all(e["name"].startswith("program ") and e["dur"] > 0 for e in kernels)
    assert all(e["args"]["signature"] and e["args"]["ops"] > 0 for e in kernels)
    assert sum(e["name"] == "copy host to tpu" for e in copies) == delta["transfers_to_device"] == 3  # batch, seed
    assert all(e["dur"] > 0 and e["args"]["bytes"] > 0 for e in copies)
    # The device's process row is named after the device and its platform.
    device_names = [e["args"]["name"] for e in events if e.get("name") == "process_name" and e["pid"] == 0]
    platform_name = torch_tpu.platform().split()[0]  # "cpu (xla-cpu-pjrt, ...)"
    assert device_names == [f"tpu:0 ({platform_name})"]


def test_cpu_only_profile_records_no_tpu_activity(tmp_path):
    model, optimizer, batch = make_training()
    train_step(model, optimizer, batch)
    prof, delta = profiled([ProfilerActivity.CPU], lambda: train_step(model, optimizer, batch))
    assert delta["executions"] > 0
    assert tpu_events(prof) == []
    assert any(e.name == "aten::addmm" for e in prof.events())  # the CPU side was recorded
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    categories = {e.get("cat") for e in json.loads(path.read_text())["traceEvents"]}
    assert not categories & {"kernel", "gpu_memcpy", "privateuse1_runtime"}


def test_profiling_twice_records_only_what_runs_inside_each_profile():
    model, optimizer, batch = make_training()
    train_step(model, optimizer, batch)
    first, first_delta = profiled(BOTH, lambda: train_step(model, optimizer, batch))
    for _ in range(3):
        train_step(model, optimizer, batch)  # outside any profile: the recorder is off
    second, second_delta = profiled(BOTH, lambda: train_step(model, optimizer, batch))
    assert len(tpu_events(first, "program ")) == first_delta["executions"]
    assert len(tpu_events(second, "program ")) == second_delta["executions"]
    # A profile with no tpu work records no tpu activity.
    idle, _ = profiled(BOTH, lambda: torch.ones(4) + 1)
    assert tpu_events(idle) == []


@pytest.mark.execution_mode("strict")  # each matmul is a program of its own
def test_a_schedule_records_only_the_active_steps():
    a = torch.randn(16, 16).to(TPU)
    (a @ a).cpu()
    recorded = []
    with profile(
        activities=BOTH,
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: recorded.append(len(tpu_events(p, "program "))),
    ) as prof:
        for step in range(5):
            for _ in range(step + 1):  # step i runs i + 1 programs
                b = a @ a
            b.cpu()
            prof.step()
    assert recorded == [3 + 4]


# Runs in a fresh process with an empty compile cache: every program compiles, then (after the
# in-memory cache is dropped) loads from the disk cache.
COLD_CACHE_PROFILE = """
import json, torch_tpu
from torch.autograd import DeviceType
from torch.profiler import profile
from test_profiler import BOTH, make_training, train_step

def profile_step():
    before = torch_tpu.metrics.snapshot()
    with profile(activities=BOTH) as prof:
        train_step(*training)
    after = torch_tpu.metrics.snapshot()
    host = [e for e in prof.events() if e.device_type == DeviceType.CPU]
    return {
        "compiles": after["compiles"] - before["compiles"],
        "loads": after["disk_cache_hits"] - before["disk_cache_hits"],
        "compile_events": [e.time_range.elapsed_us() for e in host if e.name.startswith("compile program ")],
        "load_events": [e.time_range.elapsed_us() for e in host if e.name.startswith("load cached program ")],
        "inside_an_op": sum(e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::") for e in host
                            if e.name.startswith(("compile program ", "load cached program "))),
    }

training = make_training()
cold = profile_step()
torch_tpu._C._clear_memory_cache()
warm = profile_step()
print(json.dumps({"cold": cold, "disk": warm}))
"""


def test_compiles_and_disk_cache_loads_are_recorded(tmp_path):
    tests = os.path.dirname(os.path.abspath(__file__))
    result = run_python(
        f"import sys; sys.path.insert(0, {tests!r})\n" + COLD_CACHE_PROFILE, TORCH_TPU_CACHE_DIR=str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    cold, disk = figures["cold"], figures["disk"]
    assert cold["compiles"] > 0
    assert len(cold["compile_events"]) == cold["compiles"]
    assert all(duration > 0 for duration in cold["compile_events"])
    assert cold["inside_an_op"] > 0  # a compile nests under the op that needed the program
    assert disk["compiles"] == 0
    assert disk["loads"] > 0
    assert len(disk["load_events"]) == disk["loads"]
    assert all(duration > 0 for duration in disk["load_events"])
