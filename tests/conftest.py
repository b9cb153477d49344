"""Shared test helpers: every test compares the tpu result with PyTorch on the CPU."""

from __future__ import annotations

import pytest
import torch
from float32_reference import Float32Reference

import torch_tpu  # registers the tpu device
from torch_tpu.precision import Precision, precision

TPU = torch.device("tpu")


@pytest.fixture(autouse=True)
def highest_precision():
    """Tests compare f32 products with the CPU's f32 arithmetic, so they run under HIGHEST rather
    than the DEFAULT mode (bf16 operands); tests of the modes set their own."""
    with precision(Precision.HIGHEST):
        yield


@pytest.fixture(autouse=True)
def float32_cpu_reference():
    """The CPU side of every comparison computes its accumulating bf16/f16 kernels in float32 and
    rounds once (float32_reference.py), so no test depends on the CPU's machine-specific half
    kernels (AVX2 and AVX-512 machines differ)."""
    with Float32Reference():
        yield


@pytest.fixture(autouse=True)
def marked_execution_mode(request):
    """A test marked ``@pytest.mark.execution_mode("strict")`` checks that mode's own behaviour
    (one program per op, an upload for a small fill) and runs in it; the others run in whatever
    mode the suite runs in (CI runs some files in both)."""
    marker = request.node.get_closest_marker("execution_mode")
    if marker is None:
        yield
        return
    with torch_tpu.execution_mode(marker.args[0]):
        yield


@pytest.fixture
def no_cpu_fallback():
    """Fails a test any of whose ops ran through the CPU fallback, for files that test lowerings:
    enable with ``pytestmark = pytest.mark.usefixtures("no_cpu_fallback")``."""
    torch_tpu.metrics.reset()
    yield
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches reset before and after a test, for the torch.compile tests."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Tolerances that fit each dtype (elementwise results; reductions may widen them).
TOLERANCES = {
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.complex64: dict(rtol=1.3e-6, atol=1e-5),
}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, **kwargs) -> None:
    """Compares a tpu tensor with the CPU reference: dtype, shape and values."""
    assert actual.device.type == "tpu", f"result is on {actual.device}, expected tpu"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    tolerance = dict(TOLERANCES.get(expected.dtype, dict(rtol=0, atol=0)))
    tolerance.update(kwargs)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tolerance)


def assert_same_work_alike(actual: torch.Tensor, expected: torch.Tensor, rtol=1e-5, atol=1e-7) -> None:
    """Compares two tpu results of the same computation recorded as different work (a
    checkpoint's recomputation in the backward, a model whose weights are offloaded). Strict mode
    runs the very same programs, so the values are identical; fused mode puts the ops into other
    programs, whose fusions may round differently in the last bits, so they agree to the given
    precision of the dtype computed in."""
    if torch_tpu.execution_mode() == torch_tpu.ExecutionMode.STRICT:
        torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=0, atol=0)
    else:
        torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol)


def make(shape, dtype=torch.float32, low=None, high=None, seed=None) -> torch.Tensor:
    """Fresh random CPU input of any dtype."""
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_complex:
        parts = [make(shape, dtype.to_real(), low, high, None if seed is None else seed + i) for i in (0, 1)]
        return torch.complex(*parts)
    if dtype.is_floating_point:
        lo = -3.0 if low is None else low
        hi = 3.0 if high is None else high
        return (torch.rand(shape, generator=generator, dtype=torch.float32) * (hi - lo) + lo).to(dtype)
    lo = -20 if low is None else low
    hi = 20 if high is None else high
    if dtype == torch.uint8:
        lo = max(lo, 0)
    return torch.randint(lo, hi, shape, generator=generator, dtype=dtype)


def raises_like_cpu(fn):
    """`fn(device)` raises on tpu what it raises on the CPU: the same type and first line."""
    with pytest.raises(Exception) as cpu_error:
        fn(torch.device("cpu"))
    with pytest.raises(type(cpu_error.value)) as tpu_error:
        fn(TPU)
    assert str(tpu_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


def assert_elementwise_matches(fn, x: torch.Tensor) -> None:
    """An elementwise `fn` on tpu against the CPU: on `x`, and on a non-contiguous 20x20 view of its
    first 400 values."""
    assert_close(fn(x.to(TPU)), fn(x))
    grid = x[:400].reshape(20, 20)
    assert_close(fn(noncontiguous(grid.to(TPU))), fn(grid))


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values as ``t`` through a non-contiguous (transposed, strided) view."""
    if t.dim() < 2:
        big = torch.empty(t.numel() * 2, dtype=t.dtype, device=t.device)
        view = big[::2]
        view.copy_(t.reshape(-1))
        return view.view(t.shape) if t.dim() == 1 else view.reshape(t.shape)
    base = torch.empty(t.shape[:-2] + (t.shape[-1], t.shape[-2] * 2), dtype=t.dtype, device=t.device)
    view = base[..., ::2].transpose(-1, -2)
    view.copy_(t)
    return view


@pytest.fixture
def tpu():
    return TPU


def run_python(code: str, **env: str):
    """Runs `code` in a fresh interpreter (for per-process settings such as the device count)."""
    import os
    import subprocess
    import sys

    full_env = dict(os.environ)
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)
