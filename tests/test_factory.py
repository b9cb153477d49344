"""Factory functions on the tpu device against the CPU: values, dtypes, shapes, out= and errors."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

ALL_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]
FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
RANGE_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.int64]


# ---- empty / zeros / ones / full ----


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_zeros_ones(dtype):
    assert_close(torch.zeros(2, 3, dtype=dtype, device=TPU), torch.zeros(2, 3, dtype=dtype))
    assert_close(torch.ones(4, dtype=dtype, device=TPU), torch.ones(4, dtype=dtype))
    assert_close(torch.ones((), dtype=dtype, device=TPU), torch.ones((), dtype=dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_empty_shape_and_dtype(dtype):
    x = torch.empty(3, 0, 2, dtype=dtype, device=TPU)
    assert x.device.type == "tpu" and x.dtype == dtype and x.shape == (3, 0, 2)
    y = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=TPU)
    assert y.stride() == (1, 2)


@pytest.mark.parametrize("value", [1, -7, True, False, 2.5, -0.0, float("inf")], ids=lambda v: f"value={v!r}")
def test_full_infers_dtype_like_cpu(value):
    assert_close(torch.full((2, 3), value, device=TPU), torch.full((2, 3), value))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_full_with_dtype(dtype):
    assert_close(torch.full((3, 2), 3, dtype=dtype, device=TPU), torch.full((3, 2), 3, dtype=dtype))
    assert_close(torch.full((), -1.5, dtype=dtype, device=TPU), torch.full((), -1.5, dtype=dtype))


def test_full_out():
    out = torch.empty(5, device=TPU)
    torch.full((2, 2), 4.0, out=out)
    assert_close(out, torch.full((2, 2), 4.0))


# ---- *_like and new_* ----


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_like_factories(dtype):
    cpu = make((3, 4), dtype)
    x = cpu.to(TPU)
    assert_close(torch.zeros_like(x), torch.zeros_like(cpu))
    assert_close(torch.ones_like(x), torch.ones_like(cpu))
    assert_close(torch.full_like(x, 7), torch.full_like(cpu, 7))
    assert_close(torch.zeros_like(x, dtype=torch.float16), torch.zeros_like(cpu, dtype=torch.float16))
    empty = torch.empty_like(x)
    assert empty.device.type == "tpu" and empty.dtype == dtype and empty.shape == (3, 4)


def test_like_factories_keep_layout_of_noncontiguous_input():
    cpu = make((4, 6))
    x = noncontiguous(cpu.to(TPU))
    result = torch.ones_like(x)
    assert result.stride() == torch.ones_like(noncontiguous(cpu)).stride()
    assert_close(result, torch.ones(4, 6))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_new_factories(dtype):
    cpu = make((2,), dtype)
    x = cpu.to(TPU)
    assert_close(x.new_zeros(3, 2), cpu.new_zeros(3, 2))
    assert_close(x.new_ones((4,)), cpu.new_ones((4,)))
    assert_close(x.new_full((2, 2), 5), cpu.new_full((2, 2), 5))
    assert_close(x.new_ones(2, dtype=torch.int32), cpu.new_ones(2, dtype=torch.int32))
    empty = x.new_empty((5, 1))
    assert empty.device.type == "tpu" and empty.dtype == dtype and empty.shape == (5, 1)


def test_random_like_factories():
    x = torch.zeros(50, 40, dtype=torch.bfloat16).to(TPU)
    rand = torch.rand_like(x)
    assert rand.dtype == torch.bfloat16 and rand.shape == x.shape
    assert 0 <= rand.cpu().min() and rand.cpu().max() < 1
    randn = torch.randn_like(x, dtype=torch.float32)
    assert randn.dtype == torch.float32 and randn.cpu().std() > 0.5
    randint = torch.randint_like(x, 3, 9, dtype=torch.int64).cpu()
    assert randint.dtype == torch.int64
    assert randint.min() == 3 and randint.max() == 8


# ---- torch.tensor / scalar_tensor ----


@pytest.mark.parametrize(
    "data",
    [[1, 2, 3], [[1.5, -2.0], [3.25, 4.0]], [True, False], 7, 2.5, [[1, 2], [3, 4]]],
    ids=["ints", "floats2d", "bools", "int0d", "float0d", "ints2d"],
)
def test_tensor_from_python(data):
    assert_close(torch.tensor(data, device=TPU), torch.tensor(data))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tensor_with_dtype(dtype):
    data = [[0, 1, -2], [3, 4, 5]]
    assert_close(torch.tensor(data, dtype=dtype, device=TPU), torch.tensor(data, dtype=dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scalar_tensor(dtype):
    assert_close(torch.scalar_tensor(3, dtype=dtype, device=TPU), torch.scalar_tensor(3, dtype=dtype))
    assert_close(torch.scalar_tensor(-1.5, device=TPU), torch.scalar_tensor(-1.5))


# ---- arange ----

ARANGE_ARGS = [
    (5,),
    (0,),
    (2, 11, 3),
    (10, 2, -3),
    (-5, 5),
    (0, 1, 0.1),
    (1.0, -1.0, -0.25),
    (-2.5, 7.3, 0.7),
    (0, 1000, 0.37),
    (0.5, 9.75, 1.5),
]


@pytest.mark.parametrize("args", ARANGE_ARGS, ids=str)
def test_arange_default_dtype(args):
    assert_close(torch.arange(*args, device=TPU), torch.arange(*args))


@pytest.mark.parametrize("dtype", RANGE_DTYPES)
@pytest.mark.parametrize("args", [(7,), (-3, 12, 2), (20, -4, -3), (0.5, 9.75, 1.5)], ids=str)
def test_arange_dtype(args, dtype):
    assert_close(torch.arange(*args, dtype=dtype, device=TPU), torch.arange(*args, dtype=dtype))


def test_arange_large_float_count():
    expected = torch.arange(-1.0, 1.0, 1e-4)
    actual = torch.arange(-1.0, 1.0, 1e-4, device=TPU)
    assert actual.shape == expected.shape
    assert_close(actual, expected, atol=1e-6)


def test_arange_out():
    out = torch.empty(0, dtype=torch.int64, device=TPU)
    torch.arange(3, 15, 4, out=out)
    assert_close(out, torch.arange(3, 15, 4))
    out_float = torch.empty(0, dtype=torch.float32, device=TPU)
    torch.arange(0, 2, 0.5, out=out_float)
    assert_close(out_float, torch.arange(0, 2, 0.5))


def test_arange_int_with_float_arguments_truncates_like_cpu():
    assert_close(
        torch.arange(0.9, 7.9, 2.5, dtype=torch.int64, device=TPU), torch.arange(0.9, 7.9, 2.5, dtype=torch.int64)
    )


def test_arange_errors():
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 10, 0, device=TPU)
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        torch.arange(0, 10, -1, device=TPU)
    with pytest.raises(NotImplementedError, match="arange_cpu"):
        torch.arange(3, dtype=torch.bool, device=TPU)


def test_new_arange_values_do_not_recompile():
    import torch_tpu

    torch.arange(3, 20, 2, device=TPU).cpu()
    before = torch_tpu.metrics.snapshot()
    torch.arange(5, 22, 2, device=TPU).cpu()
    after = torch_tpu.metrics.snapshot()
    assert after["compiles"] == before["compiles"]
    assert after["cache_misses"] == before["cache_misses"]


@pytest.mark.execution_mode("strict")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64])
def test_small_fills_are_uploads_and_others_programs(dtype):
    # A small fill_ of a whole storage is an upload (autograd's seed, small constants); a large
    # one, one of part of a storage, and one recorded in fused mode are programs.
    import torch_tpu

    def counts(fn):
        torch.tpu.synchronize()
        before = torch_tpu.metrics.snapshot()
        result = fn()
        torch.tpu.synchronize()
        after = torch_tpu.metrics.snapshot()
        return result, {k: after[k] - before[k] for k in ("executions", "transfers_to_device")}

    value = True if dtype == torch.bool else (2 + 1j if dtype.is_complex else 3)
    small, figures = counts(lambda: torch.full((4, 5), value, dtype=dtype, device=TPU))
    assert figures == {"executions": 0, "transfers_to_device": 1}
    assert_close(small, torch.full((4, 5), value, dtype=dtype))
    large, figures = counts(lambda: torch.full((128, 128), value, dtype=dtype, device=TPU))
    assert figures["executions"] == 1
    assert_close(large, torch.full((128, 128), value, dtype=dtype))
    base = make((4, 5), dtype)
    part = base.to(TPU)
    _, figures = counts(lambda: part[1:3].fill_(value))
    assert figures["executions"] == 1
    assert_close(part, base.index_fill(0, torch.tensor([1, 2]), value))
    with torch_tpu.execution_mode("defer_and_fuse"):
        fused, figures = counts(lambda: torch.full((4, 5), value, dtype=dtype, device=TPU).cpu())
    assert figures["executions"] == 1
    assert torch.equal(fused, torch.full((4, 5), value, dtype=dtype))


def test_small_fill_raises_the_cpus_overflow_error():
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t without overflow"):
        torch.empty(3, dtype=torch.uint8, device=TPU).fill_(300)


# ---- linspace / logspace ----

LINSPACE_ARGS = [
    (0, 1, 5),
    (-3, 7, 1),
    (2, 2, 4),
    (5, -5, 11),
    (-1.5, 2.25, 17),
    (0, 1, 1000),
    (0, 10, 0),
    (3, 8, 2),
]


@pytest.mark.parametrize("dtype", RANGE_DTYPES)
@pytest.mark.parametrize("args", LINSPACE_ARGS, ids=str)
def test_linspace(args, dtype):
    # (half types: the CPU rounds each step to half precision, we compute in f32; within an ulp)
    assert_close(torch.linspace(*args, dtype=dtype, device=TPU), torch.linspace(*args, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16])
@pytest.mark.parametrize(
    "args", [(0, 10, 7), (-7, 13, 9), (0.5, 9.7, 6), (100, 3, 13), (-20, -1, 5), (0, 255, 4), (-9.9, 9.9, 8)], ids=str
)
def test_linspace_integer_matches_cpu_exactly(args, dtype):
    assert_close(torch.linspace(*args, dtype=dtype, device=TPU), torch.linspace(*args, dtype=dtype))


@pytest.mark.parametrize("args", [(0, 10, 7), (0, 255, 4), (3, 200, 11)], ids=str)
def test_linspace_uint8(args):
    assert_close(torch.linspace(*args, dtype=torch.uint8, device=TPU), torch.linspace(*args, dtype=torch.uint8))


def test_linspace_default_dtype_and_out():
    assert_close(torch.linspace(-1, 1, 9, device=TPU), torch.linspace(-1, 1, 9))
    out = torch.empty(0, dtype=torch.float32, device=TPU)
    torch.linspace(0, 3, 7, out=out)
    assert_close(out, torch.linspace(0, 3, 7))


def test_linspace_tensor_endpoints():
    start, end = torch.tensor(1.5), torch.tensor(-2.0)
    assert_close(torch.linspace(start, end, 6, device=TPU), torch.linspace(start, end, 6))


def test_linspace_errors():
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.linspace(0, 1, -1, device=TPU)
    with pytest.raises(NotImplementedError, match="linspace_cpu"):
        torch.linspace(0, 1, 3, dtype=torch.bool, device=TPU)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("args", [(0, 2, 5), (-1, 1, 7, 2.0), (1, -2, 4, 3.5), (2, 2, 1)], ids=str)
def test_logspace(args, dtype):
    expected = torch.logspace(*args, dtype=dtype)
    assert_close(torch.logspace(*args, dtype=dtype, device=TPU), expected)


# ---- eye ----


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(3,), (3, 5), (4, 2), (1,), (0,), (0, 3)], ids=str)
def test_eye(shape, dtype):
    assert_close(torch.eye(*shape, dtype=dtype, device=TPU), torch.eye(*shape, dtype=dtype))


def test_eye_out_resizes_and_writes_through_views():
    out = torch.empty(0, device=TPU)
    torch.eye(3, 4, out=out)
    assert_close(out, torch.eye(3, 4))
    base = torch.full((5, 8), 9.0).to(TPU)
    view = base[:, ::2]  # 5x4, non-contiguous
    torch.eye(5, 4, out=view)
    expected = torch.full((5, 8), 9.0)
    expected[:, ::2] = torch.eye(5, 4)
    assert_close(base, expected)


def test_eye_errors():
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        torch.eye(-1, device=TPU)
    with pytest.raises(RuntimeError, match="m must be greater or equal to 0, got -2"):
        torch.eye(2, -2, device=TPU)
