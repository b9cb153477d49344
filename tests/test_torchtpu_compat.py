"""TorchTPU 0.2.0's API (EagerMode, set_eager_mode, eager_mode, allow_excess_precision, the TPU_*
environment aliases, torch.tpu.ops.optimization_barrier) and torch's fp32_precision switches, each
mapped onto torch_tpu's own modes (issue 12, points 8 and 9)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
import torch
from conftest import TPU, assert_close, make

import torch_tpu
from torch_tpu import ExecutionMode, Precision

EagerMode = torch.tpu.EagerMode

# ---- Eager modes ----


def test_eager_modes_are_execution_modes():
    assert EagerMode.DEFER_NEVER.execution_mode is ExecutionMode.STRICT
    assert EagerMode.DEFER_AND_FUSE.execution_mode is ExecutionMode.DEFER_AND_FUSE
    assert EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING.execution_mode is ExecutionMode.DEBUG
    assert torch.tpu.eager_mode().execution_mode is torch_tpu.execution_mode()
    assert torch_tpu.EagerMode is EagerMode and torch_tpu.set_eager_mode is torch.tpu.set_eager_mode


@pytest.mark.parametrize("mode", list(EagerMode))
def test_set_eager_mode_as_context_restores(mode):
    ambient = torch.tpu.eager_mode()
    a, b = make((8, 8), seed=1), make((8, 8), seed=2)
    with torch.tpu.set_eager_mode(mode) as entered:
        assert entered is mode
        assert torch.tpu.eager_mode() is mode
        assert torch_tpu.execution_mode() is mode.execution_mode
        result = ((a.to(TPU) + 1) * b.to(TPU)).relu().sum(0)
        assert_close(result, ((a + 1) * b).relu().sum(0))
    assert torch.tpu.eager_mode() is ambient


def test_set_eager_mode_as_setter():
    ambient = torch.tpu.eager_mode()
    try:
        torch.tpu.set_eager_mode(EagerMode.DEFER_AND_FUSE)
        assert torch_tpu.execution_mode() is ExecutionMode.DEFER_AND_FUSE
        x = make((5,), seed=3)
        y = x.to(TPU).exp()
        assert torch_tpu._C._pending_count() > 0  # deferred, as fused eager defers
        assert_close(y, x.exp())
        torch.tpu.set_eager_mode("DEFER_NEVER_AND_LAUNCH_BLOCKING")
        assert torch.tpu.eager_mode() is EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        torch.tpu.set_eager_mode(ExecutionMode.DEFER_AND_FUSE)  # torch_tpu's own names work too
        assert torch.tpu.eager_mode() is EagerMode.DEFER_AND_FUSE
    finally:
        torch.tpu.set_eager_mode(ambient)
    assert torch.tpu.eager_mode() is ambient


@pytest.mark.parametrize("bad", ["DEFER_SOMETIMES", None, 3])
def test_set_eager_mode_rejects_unknown_modes(bad):
    ambient = torch.tpu.eager_mode()
    with pytest.raises(ValueError, match="unknown execution mode"):
        torch.tpu.set_eager_mode(bad)
    assert torch.tpu.eager_mode() is ambient


def _mode_in_fresh_process(**variables) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TPU_LAUNCH", "TORCH_TPU_DEFER", "TPU_"))}
    env.update(variables)
    code = "import torch; print(torch.tpu.eager_mode().name)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[-1]


@pytest.mark.parametrize(
    "variables, expected",
    [
        ({}, "DEFER_AND_FUSE"),  # fused eager is torch_tpu's default
        ({"TPU_DEFER_AND_FUSE": ""}, "DEFER_AND_FUSE"),
        ({"TPU_DEFER_AND_FUSE": "1"}, "DEFER_AND_FUSE"),
        ({"TPU_LAUNCH_BLOCKING": "1"}, "DEFER_NEVER_AND_LAUNCH_BLOCKING"),
        ({"TPU_DEFER_AND_FUSE": "0"}, "DEFER_NEVER"),
        ({"TORCH_TPU_DEFER_AND_FUSE": "0", "TPU_DEFER_AND_FUSE": "1"}, "DEFER_NEVER"),  # ours wins
        ({"TORCH_TPU_DEFER_AND_FUSE": "1"}, "DEFER_AND_FUSE"),
    ],
)
def test_environment_aliases(variables, expected):
    assert _mode_in_fresh_process(**variables) == expected


# ---- allow_excess_precision ----


def _matmul_inputs():
    return make((16, 64), seed=4), make((64, 16), seed=5)


def _bf16_operand_product(a, b):
    return a.to(torch.bfloat16).float() @ b.to(torch.bfloat16).float()


def test_allow_excess_precision_maps_onto_precision_modes():
    a, b = _matmul_inputs()
    with torch.tpu.precision(Precision.DEFAULT):
        assert torch.tpu.allow_excess_precision() is False
        with torch.tpu.allow_excess_precision(True) as mode:
            assert mode is Precision.HIGHEST and torch.tpu.precision() is Precision.HIGHEST
            assert torch.tpu.allow_excess_precision() is True
            assert_close(a.to(TPU) @ b.to(TPU), a @ b, rtol=1e-5, atol=1e-5)
        assert torch.tpu.precision() is Precision.DEFAULT
        with torch.tpu.precision(Precision.HIGH), torch.tpu.allow_excess_precision(True):
            assert torch.tpu.precision() is Precision.HIGH  # already above DEFAULT: kept
        with torch.tpu.allow_excess_precision(False) as mode:
            assert mode is Precision.DEFAULT
            assert_close(a.to(TPU) @ b.to(TPU), _bf16_operand_product(a, b), rtol=1e-5, atol=1e-4)
    assert torch.tpu.precision() is Precision.HIGHEST  # the conftest fixture's mode


def test_allow_excess_precision_as_setter_and_errors():
    with torch.tpu.precision(Precision.HIGHEST):
        torch.tpu.allow_excess_precision(False)
        assert torch.tpu.precision() is Precision.DEFAULT
        torch.tpu.allow_excess_precision(True)
        assert torch.tpu.precision() is Precision.HIGHEST
        with pytest.raises(TypeError, match="expects a bool"):
            torch.tpu.allow_excess_precision("yes")
        assert torch.tpu.precision() is Precision.HIGHEST


# ---- torch's fp32_precision switches ----

_SETTINGS = [("generic", "all"), ("cuda", "matmul")]
PRECISION_MODULE = importlib.import_module("torch_tpu.precision")  # the package's `precision` is the class


@pytest.fixture
def torch_fp32_settings():
    """Restores torch's settings (CPU side included) and the tpu mode after each test. Importing
    torch.testing._internal (the conformance tests do) freezes torch.backends' flags, as no user
    program does; the test body runs with mutation allowed again, as in a user's process."""
    saved = [torch._C._get_fp32_precision_getter(*setting) for setting in _SETTINGS]
    # Earlier tests' torch settings leave the mode to hand back; each test here starts from none.
    saved_before = list(PRECISION_MODULE._before_fp32_setting)
    PRECISION_MODULE._before_fp32_setting.clear()
    allow_mutation = getattr(torch.backends, "__allow_nonbracketed_mutation")
    with torch.tpu.precision(Precision.DEFAULT), allow_mutation():
        for backend, op in _SETTINGS:
            torch._C._set_fp32_precision_setter(backend, op, "none")
        torch.tpu.precision(Precision.DEFAULT)
        yield
        torch.backends.cuda.matmul.fp32_precision = "none"
        torch.backends.fp32_precision = "none"
    for (backend, op), value in zip(_SETTINGS, saved, strict=True):
        torch._C._set_fp32_precision_setter(backend, op, value)
    PRECISION_MODULE._before_fp32_setting[:] = saved_before


@pytest.mark.parametrize("value, expected", [("ieee", Precision.HIGHEST), ("tf32", Precision.HIGH)])
def test_generic_fp32_precision(torch_fp32_settings, value, expected):
    torch.backends.fp32_precision = value
    assert torch.tpu.precision() is expected
    assert torch.backends.fp32_precision == value  # torch's own setting is untouched
    torch.backends.fp32_precision = "none"
    assert torch.tpu.precision() is Precision.DEFAULT  # "none" hands the choice back


def test_ieee_makes_tpu_matmuls_match_the_cpu(torch_fp32_settings):
    a, b = _matmul_inputs()
    default = (a.to(TPU) @ b.to(TPU)).cpu()
    assert not torch.allclose(default, a @ b, rtol=1e-5, atol=1e-5)  # DEFAULT rounds operands to bf16
    torch.backends.fp32_precision = "ieee"  # what Hugging Face's test configuration sets
    assert_close(a.to(TPU) @ b.to(TPU), a @ b, rtol=1e-5, atol=1e-5)


def test_cuda_matmul_fp32_precision(torch_fp32_settings):
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    assert torch.tpu.precision() is Precision.HIGHEST
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    assert torch.tpu.precision() is Precision.HIGH
    torch.backends.cuda.matmul.fp32_precision = "none"
    assert torch.tpu.precision() is Precision.DEFAULT


def test_backends_flags_context_restores_the_tpu_mode(torch_fp32_settings):
    with torch.tpu.precision(Precision.HIGH):
        with torch.backends.flags(fp32_precision="ieee"):
            assert torch.tpu.precision() is Precision.HIGHEST
        assert torch.tpu.precision() is Precision.HIGH
    assert torch.tpu.precision() is Precision.DEFAULT


def test_an_unknown_fp32_precision_changes_nothing(torch_fp32_settings):
    with pytest.raises(RuntimeError, match="Unknown precision"):
        torch.backends.fp32_precision = "bogus"
    assert torch.tpu.precision() is Precision.DEFAULT
    assert torch.backends.fp32_precision == "none"


def test_cpu_only_settings_leave_the_tpu_alone(torch_fp32_settings):
    saved = torch._C._get_fp32_precision_getter("mkldnn", "matmul")
    try:
        torch.backends.mkldnn.matmul.fp32_precision = "ieee"
        assert torch.tpu.precision() is Precision.DEFAULT
    finally:
        torch._C._set_fp32_precision_setter("mkldnn", "matmul", saved)


# ---- optimization_barrier ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_optimization_barrier_passes_values_through(dtype):
    x, y = make((3, 4), dtype, seed=6), make((5,), dtype, seed=7)
    xs, ys = x.to(TPU).t(), y.to(TPU)[::2]  # views: the barrier reads them as any op does
    a, b = torch.tpu.ops.optimization_barrier(xs, ys)
    assert_close(a, x.t())
    assert_close(b, y[::2])
    (single,) = torch.tpu.ops.optimization_barrier([xs])
    assert_close(single, x.t())
    assert_close(torch.tpu.ops.optimization_barrier(ys), y[::2])
    assert torch.tpu.ops.optimization_barrier() == ()


def test_optimization_barrier_is_one_stablehlo_op(tmp_path):
    code = (
        "import torch\n"
        "x = torch.arange(6.0, device='tpu').view(2, 3)\n"
        "a, b, c = torch.tpu.ops.optimization_barrier(x, x + 1, torch.ones(2, dtype=torch.int32, device='tpu'))\n"
        "print(a.sum().item(), b.sum().item(), c.sum().item())\n"
    )
    env = dict(os.environ, TORCH_TPU_DUMP_PROGRAMS="1", TORCH_TPU_DUMP_DIR=str(tmp_path), TORCH_TPU_DISK_CACHE="0")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["15.0", "21.0", "2"]
    texts = [path.read_text() for path in tmp_path.iterdir()]
    barriers = [line for text in texts for line in text.splitlines() if "stablehlo.optimization_barrier" in line]
    assert len(barriers) == 1 and ":3 = " in barriers[0], barriers


def test_optimization_barrier_in_fused_mode_and_backward():
    x = make((4, 3), seed=8).requires_grad_()
    w = make((3, 2), seed=9).requires_grad_()
    xt, wt = x.detach().to(TPU).requires_grad_(), w.detach().to(TPU).requires_grad_()
    with torch.tpu.set_eager_mode(EagerMode.DEFER_AND_FUSE):
        a, b = torch.tpu.ops.optimization_barrier(xt.sin(), wt)
        loss_tpu = (a @ b).square().sum()
        loss_tpu.backward()
    (x.sin() @ w).square().sum().backward()
    assert_close(loss_tpu.detach(), (x.sin() @ w).square().sum().detach(), rtol=1e-5, atol=1e-5)
    assert_close(xt.grad, x.grad, rtol=1e-5, atol=1e-5)
    assert_close(wt.grad, w.grad, rtol=1e-5, atol=1e-5)


def test_optimization_barrier_on_cpu_and_errors():
    x = make((3,), seed=10)
    a, b = torch.tpu.ops.optimization_barrier(x, x * 2)
    assert torch.equal(a, x) and torch.equal(b, x * 2) and a.data_ptr() != x.data_ptr()
    with pytest.raises(ValueError, match="on one device"):
        torch.tpu.ops.optimization_barrier(x, x.to(TPU))
    with pytest.raises(TypeError, match="expects tensors"):
        torch.tpu.ops.optimization_barrier(x, 3)
