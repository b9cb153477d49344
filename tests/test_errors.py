"""What bad input gets (DESIGN.md, "Errors")."""

from __future__ import annotations

import inspect
import json
import os
import re

import pytest
import torch
from conftest import assert_close, make, run_python
from torch.utils._python_dispatch import _disable_current_modes

import torch_tpu
from torch_tpu import _C, kernels

# An op with no lowering (fake quantization); if it gains one, pick another.
UNSUPPORTED = "torch.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255)"
UNSUPPORTED_OP = "aten::fake_quantize_per_tensor_affine_cachemask"


def test_unsupported_op_names_the_op_and_the_fix():
    x = make((16,)).to("tpu")
    with pytest.raises(NotImplementedError) as info:
        torch.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255)
    message = str(info.value)
    assert f"'{UNSUPPORTED_OP}'" in message
    assert "dtypes: Float" in message
    assert "TORCH_TPU_CPU_FALLBACK=1" in message


def test_cpu_fallback_warns_once_per_op_and_counts():
    result = run_python(
        f"""
import json, warnings, torch, torch_tpu
cpu = torch.randn(16)
x = cpu.to("tpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = {UNSUPPORTED}
    second = {UNSUPPORTED}
assert first.device.type == "tpu", first.device
expected = torch.fake_quantize_per_tensor_affine(cpu, 0.1, 0, 0, 255)
torch.testing.assert_close(first.cpu(), expected)
torch.testing.assert_close(second.cpu(), expected)
messages = [str(w.message) for w in caught if "{UNSUPPORTED_OP}" in str(w.message)]
print(json.dumps(dict(warnings=messages, metrics=torch_tpu.metrics.snapshot())))
""",
        TORCH_TPU_CPU_FALLBACK="1",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report["warnings"]) == 1, report["warnings"]
    assert "CPU" in report["warnings"][0]
    assert report["metrics"]["cpu_fallbacks"] == 2
    assert report["metrics"]["cpu_fallbacks_per_op"] == {UNSUPPORTED_OP: 2}


def test_argument_errors_match_the_cpu():
    a, b = make((2, 3)), make((4,))
    with pytest.raises(RuntimeError) as cpu_error:
        a + b
    with pytest.raises(RuntimeError) as tpu_error:
        a.to("tpu") + b.to("tpu")
    assert str(tpu_error.value) == str(cpu_error.value)


def test_pjrt_compile_failure_carries_message_and_dump_path():
    bad = "func.func @main(%x: tensor<2xf32>) -> tensor<3xf32> { return %x : tensor<2xf32> }"
    with pytest.raises(RuntimeError) as info:
        _C._run_stablehlo(bad, 0)
    message = str(info.value)
    match = re.search(r"written to (\S+\.mlir)", message)
    assert match, message
    assert os.path.exists(match.group(1))
    with open(match.group(1)) as dump:
        assert dump.read() == bad
    # The plugin's own diagnosis is kept, not replaced by ours.
    assert "PJRT_Client_Compile" in message or "error" in message.lower()


# A function the CPU plugin compiles but cannot run: a bf16 x bf16 = f32 product over a transposed
# operand in a unit batch fails at run time ("Unsupported element type for DotThunk::Execute").
FAILS_AT_RUN_TIME = """
func.func @main(%a: tensor<8x8xbf16>, %b: tensor<8x8xbf16>) -> tensor<8x8xf32> {
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %l = stablehlo.reshape %t : (tensor<8x8xbf16>) -> tensor<1x8x8xbf16>
  %r = stablehlo.reshape %b : (tensor<8x8xbf16>) -> tensor<1x8x8xbf16>
  %p = stablehlo.dot_general %l, %r, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<1x8x8xbf16>, tensor<1x8x8xbf16>) -> tensor<1x8x8xf32>
  %o = stablehlo.reshape %p : (tensor<1x8x8xf32>) -> tensor<8x8xf32>
  return %o : tensor<8x8xf32>
}"""
fails_at_run_time = kernels.stablehlo(
    FAILS_AT_RUN_TIME, name="test_errors::fails_at_run_time", result_types=((8, 8), torch.float32)
)


@pytest.mark.skipif(_C._platform()["platform"] != "cpu", reason="a failure of XLA's CPU plugin")
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_program_that_fails_at_run_time_names_the_op_and_keeps_the_rest(mode):
    # A failure the plugin reports only when the program runs, not when it compiles: strict mode
    # raises it at the op, as debug mode does; fused mode at the sync, naming the op and its line.
    # Either way with the plugin's message and the program's file, and every other value survives.
    cpu = make((8, 8))
    # Without the CPU reference's dispatch mode, whose frame would be the line that recorded an op.
    with _disable_current_modes(), torch_tpu.execution_mode(mode):
        for _ in range(2):  # a second try fails the same way, not as an anonymous error
            a = cpu.to("tpu").bfloat16()
            kept = a.float() * 2  # recorded in the same fused program as the failing op
            read = False
            with pytest.raises(RuntimeError) as info:
                product = fails_at_run_time(a, a)
                line = inspect.currentframe().f_lineno - 1
                read = True
                (product + 1).cpu()
            message = str(info.value)
            assert "Unsupported element type for DotThunk" in message, message
            dump = re.search(r"written to (\S+\.mlir)", message)
            assert dump and os.path.exists(dump.group(1)), message
            if mode == "strict":
                assert not read, f"raised at the read, not at the op: {message}"
            else:
                assert (
                    read and f"The failing op: kernel 'test_errors::fails_at_run_time' at {__file__}:{line}" in message
                ), message
            assert_close(kept, cpu.bfloat16().float() * 2)
            assert_close(a, cpu.bfloat16())
    torch.tpu.synchronize()  # reported once: nothing left to raise
    assert_close(torch.arange(4.0, device="tpu") + 1, torch.arange(4.0) + 1)


def test_device_out_of_memory_raises_out_of_memory_error():
    # The address-space cap keeps the probe harmless: a 1 TiB result cannot be allocated.
    result = run_python(
        """
import resource
resource.setrlimit(resource.RLIMIT_AS, (32 << 30, 32 << 30))
import torch, torch_tpu
x = torch.empty(2**38, device="tpu")
try:
    x + 1
except torch.OutOfMemoryError as e:
    print("OOM", "written to" in str(e))
small = torch.arange(4.0).to("tpu")
print((small + 1).cpu().tolist())
"""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["OOM True", "[1.0, 2.0, 3.0, 4.0]"]


def test_bad_device_index_is_a_clear_error():
    count = torch.tpu.device_count()
    message = (
        rf"Invalid device index tpu:99. The device index is out of range. It must be in \[0, {count}\), but got 99"
    )
    with pytest.raises(RuntimeError, match=message):
        torch.empty(3, device="tpu:99")
    x = make((3,)).to("tpu")
    with pytest.raises(RuntimeError, match=r"Invalid device index"):
        x.to("tpu:99")


def test_cross_device_error_matches_cuda_wording():
    x = make((3,)).to("tpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + make((3,))


@pytest.mark.parametrize("fused", ["0", "1"], ids=["strict", "fused"])
def test_dump_every_compiled_program_on_request(tmp_path, fused):
    result = run_python(
        "import torch, torch_tpu\nx = torch.arange(6.0).to('tpu')\nprint((x * 2 + 1).cpu().tolist())",
        TORCH_TPU_DUMP_DIR=str(tmp_path),
        TORCH_TPU_DUMP_PROGRAMS="1",
        TORCH_TPU_DISK_CACHE="0",
        TORCH_TPU_DEFER_AND_FUSE=fused,
    )
    assert result.returncode == 0, result.stderr
    texts = [d.read_text() for d in sorted(tmp_path.glob("program-*.mlir"))]
    if fused == "1":  # one program of both ops
        assert len(texts) == 1 and "stablehlo.multiply" in texts[0] and "stablehlo.add" in texts[0]
    else:  # mul, then add
        assert (
            len(texts) == 2 and "stablehlo.multiply" in texts[0] + texts[1] and "stablehlo.add" in texts[0] + texts[1]
        )
