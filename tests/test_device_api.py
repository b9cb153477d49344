"""Device introspection, the Dynamo device interface, fork safety, torch.multiprocessing and DLPack
on tpu (issue 12, points 5 and 6)."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, run_python

import torch_tpu
from torch_tpu import _device_module

# ---- Device properties ----


def test_device_properties_describe_the_device():
    props = torch.tpu.get_device_properties(0)
    info = torch_tpu._C._platform()
    assert props.name == info["devices"][0] == torch.tpu.get_device_name(0) == torch.tpu.get_device_name()
    assert props.platform == info["platform"]
    assert props.plugin == info["plugin"]
    assert props.total_memory == torch.tpu.mem_get_info(0)[1] > 0
    assert (props.major, props.minor) == torch.tpu.get_device_capability(0)
    assert props.multi_processor_count >= 1
    assert "total_memory=" in repr(props) and props.name in repr(props)
    assert torch.tpu.get_device_properties("tpu:0").name == props.name
    assert torch.tpu.get_device_properties(TPU).name == props.name


def test_supported_dtypes_match_accelerator_capability_and_round_trip():
    capability = torch.accelerator.get_device_capability()
    assert capability == torch.accelerator.get_device_capability("tpu:0")
    dtypes = capability["supported_dtypes"]
    assert set(torch.tpu.get_device_properties().supported_dtypes) == dtypes
    assert {torch.float32, torch.bfloat16, torch.int64, torch.bool} <= dtypes
    assert torch.qint8 not in dtypes
    for dtype in dtypes:
        cpu = make((5,), dtype, seed=1)
        assert_close(cpu.to(TPU), cpu)


@pytest.mark.parametrize(
    "kind, capability",
    [("TPU v4", (4, 0)), ("TPU v5 lite", (5, 0)), ("TPU v5p", (5, 0)), ("TPU v6e", (6, 0)), ("cpu", (0, 0))],
)
def test_capability_from_device_kind(kind, capability):
    assert _device_module._capability_of(kind) == capability


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.tpu.get_device_properties(7),
        lambda: torch.tpu.get_device_name(7),
        lambda: torch.tpu.get_device_capability("tpu:7"),
        lambda: torch.tpu.set_device(7),
        lambda: torch.tpu.set_device(-2),
    ],
)
def test_invalid_device_index_uses_pytorch_wording(call):
    with pytest.raises(RuntimeError, match=r"The device index is out of range. It must be in \[0, 1\), but got"):
        call()
    assert torch.tpu.current_device() == 0


def test_accelerator_capability_rejects_a_missing_device():
    with pytest.raises(RuntimeError, match="tpu:7"):
        torch.accelerator.get_device_capability("tpu:7")


def test_get_device_properties_rejects_other_devices():
    with pytest.raises(ValueError, match="Expected a tpu device"):
        torch.tpu.get_device_properties("cpu")


def test_tpu_device():
    assert torch_tpu.api.tpu_device() == torch.device("tpu", 0)
    assert torch.ones(2, device=torch_tpu.api.tpu_device()).device.type == "tpu"


# ---- Dynamo's device interface ----


def test_dynamo_interface_is_ours():
    from torch._dynamo import device_interface

    interface = device_interface.get_interface_for_device("tpu")
    assert interface.__name__ == "TpuInterface" and interface.__module__ == "torch_tpu._device_module"
    assert interface.device_count() == torch.tpu.device_count()
    assert interface.is_available() and interface.current_device() == 0
    assert interface.get_device_properties().name == torch.tpu.get_device_name()
    assert interface.Worker.get_device_properties(0).name == torch.tpu.get_device_name()
    assert interface.is_dtype_supported(torch.float32) and not interface.is_dtype_supported(torch.qint8)
    assert interface.Event(enable_timing=True).device.type == "tpu"
    assert interface.Stream().device == torch.device("tpu", 0)
    assert interface.exchange_device(0) == 0
    # A later init_device_reg (torch's own registration) must not bring the stub back.
    device_interface.init_device_reg()
    assert device_interface.get_interface_for_device("tpu") is not None
    assert device_interface.get_interface_for_device("tpu").__module__ == "torch_tpu._device_module"


def test_dynamo_interface_counts_devices_in_a_fresh_process():
    result = run_python(
        "import torch\n"
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "print(get_interface_for_device('tpu').device_count())\n",
        TORCH_TPU_NUM_DEVICES="2",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "2"


# ---- fork ----

_FORK_SCRIPT = """
import os, sys, torch
{before}
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    try:
        torch.manual_seed(0)  # a DataLoader worker does this; it must leave the device alone
        bad = torch.tpu._is_in_bad_fork()
        value = (torch.arange(3.0, device="tpu") * 2).sum().item()
        message = f"ok {{bad}} {{value}}"
    except RuntimeError as error:
        message = f"error {{torch.tpu._is_in_bad_fork()}} {{error}}"
    os.write(write, message.encode())
    os._exit(0)
os.close(write)
os.waitpid(pid, 0)
print(os.read(read, 4096).decode())
"""


def test_forked_child_after_init_raises_instead_of_hanging():
    result = run_python(_FORK_SCRIPT.format(before="torch.ones(2, device='tpu').sum().item()"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("error True Cannot re-initialize tpu in forked subprocess"), result.stdout
    assert "'spawn' start method" in result.stdout


def test_forked_child_before_init_uses_the_device():
    result = run_python(_FORK_SCRIPT.format(before="assert not torch.tpu.is_initialized()"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok False 6.0", result.stdout


def test_bad_fork_init_raises_the_same_error(monkeypatch):
    monkeypatch.setattr(_device_module, "_in_bad_fork", True)
    with pytest.raises(RuntimeError, match="Cannot re-initialize tpu in forked subprocess"):
        torch.tpu.init()


# ---- torch.multiprocessing ----


def test_sending_a_tpu_tensor_through_a_pipe_raises():
    sender, receiver = torch.multiprocessing.Pipe()
    tensor = torch.ones(3, device=TPU)
    with pytest.raises(RuntimeError, match="Cannot share a tpu tensor with another process"):
        sender.send(tensor)
    with pytest.raises(RuntimeError, match="Cannot share a tpu tensor"):
        sender.send(torch.nn.Parameter(tensor))
    with pytest.raises(RuntimeError, match="Cannot share a tpu storage"):
        sender.send(tensor.untyped_storage())
    cpu = make((3,), seed=2)
    sender.send(cpu)  # the CPU path is unchanged
    assert torch.equal(receiver.recv(), cpu)


def test_a_tpu_tensor_on_a_queue_raises_at_the_receiver_instead_of_hanging():
    queue = torch.multiprocessing.get_context("spawn").Queue()
    queue.put(torch.ones(3, device=TPU))
    with pytest.raises(RuntimeError, match="Cannot share a tpu tensor with another process"):
        queue.get(timeout=60)
    cpu = make((4,), seed=3)
    queue.put(cpu)
    assert torch.equal(queue.get(timeout=60), cpu)
    queue.close()


_SPAWN_SCRIPT = """
import torch
import torch.multiprocessing as mp


def work(queue):
    queue.put(torch.ones(2, device="tpu"))


if __name__ == "__main__":
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=work, args=(queue,))
    process.start()
    try:
        queue.get(timeout=240)
    except RuntimeError as error:
        print("raised", error)
    process.join(60)
"""


def test_queue_error_from_a_spawned_child(tmp_path):
    script = tmp_path / "send.py"
    script.write_text(_SPAWN_SCRIPT)
    result = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')")
    assert result.returncode == 0, result.stderr
    assert "raised Cannot share a tpu tensor" in result.stdout


# ---- DLPack (in a subprocess: the unguarded failure is a segfault) ----


def test_dlpack_raises_clear_errors_and_copies_to_the_cpu_on_request():
    result = run_python(
        "import numpy, torch\n"
        "from torch.utils.dlpack import DLDeviceType\n"
        "t = torch.arange(6.0, device='tpu').view(2, 3)\n"
        "attempts = [\n"
        "    lambda: torch.to_dlpack(t),\n"
        "    lambda: torch.utils.dlpack.to_dlpack(t),\n"
        "    lambda: t.__dlpack__(),\n"
        "    lambda: t.__dlpack__(max_version=(1, 0)),\n"
        "    lambda: torch.from_dlpack(t),\n"
        "    lambda: numpy.from_dlpack(t),\n"
        "    lambda: t.__dlpack__(dl_device=(DLDeviceType.kDLCPU, 0), copy=False),\n"
        "    lambda: torch.ones(2, device='tpu', requires_grad=True).__dlpack__(),\n"
        "]\n"
        "for attempt in attempts:\n"
        "    try:\n"
        "        attempt()\n"
        "        print('no error')\n"
        "    except BufferError as e:\n"
        "        print('BufferError', str(e)[:40])\n"
        "print(t.__dlpack_device__() == (DLDeviceType.kDLExtDev, 0))\n"
        "copy = numpy.from_dlpack(t, device='cpu')\n"
        "print(copy.tolist() == t.cpu().tolist())\n"
        "cpu = torch.arange(3)\n"
        "print(torch.equal(torch.from_dlpack(torch.to_dlpack(cpu)), cpu))\n"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert all(line.startswith("BufferError") for line in lines[:8]), result.stdout
    assert sum("tpu tensors cannot be exported" in line for line in lines[:7]) == 7, result.stdout
    assert "require grad" in lines[7]
    assert lines[8:11] == ["True", "True", "True"], result.stdout
