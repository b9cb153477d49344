"""searchsorted, bucketize, trace and linalg_cross on tpu against the CPU, with gradients."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

SEARCH_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def sorted_boundaries(shape, dtype):
    # Small integer ranges give repeated boundaries and values equal to them (the ties).
    return make(shape, dtype, low=-5, high=5).sort(dim=-1).values


# ---- searchsorted / bucketize ----


@pytest.mark.parametrize("dtype", SEARCH_DTYPES)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_boundaries(dtype, right):
    boundaries = sorted_boundaries((9,), dtype)
    values = make((4, 6), dtype, low=-6, high=6)
    expected = torch.searchsorted(boundaries, values, right=right)
    assert_close(torch.searchsorted(boundaries.to(TPU), values.to(TPU), right=right), expected)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("out_int32", [False, True])
def test_searchsorted_batched_side_out_int32(side, out_int32):
    boundaries = sorted_boundaries((2, 3, 7), torch.float32).round()
    values = make((2, 3, 5), low=-6, high=6).round()
    expected = torch.searchsorted(boundaries, values, side=side, out_int32=out_int32)
    actual = torch.searchsorted(boundaries.to(TPU), values.to(TPU), side=side, out_int32=out_int32)
    assert_close(actual, expected)


def test_searchsorted_sorter_scalar_nan_noncontiguous_and_empty():
    boundaries = make((8,), low=-4, high=4)
    sorter = boundaries.argsort()
    values = torch.tensor([-5.0, 0.0, 1.5, 5.0, float("nan")])
    expected = torch.searchsorted(boundaries, values, sorter=sorter)
    assert_close(torch.searchsorted(boundaries.to(TPU), values.to(TPU), sorter=sorter.to(TPU)), expected)
    sorted_values = boundaries.sort().values
    for scalar in (0.25, 3):
        expected = torch.searchsorted(sorted_values, scalar, right=True)
        assert_close(torch.searchsorted(sorted_values.to(TPU), scalar, right=True), expected)
    batched = sorted_boundaries((5, 6), torch.float32)
    queries = make((5, 4), low=-6, high=6)
    expected = torch.searchsorted(batched, queries)
    actual = torch.searchsorted(noncontiguous(batched.to(TPU)), noncontiguous(queries.to(TPU)))
    assert_close(actual, expected)
    empty = torch.empty(0, 3)
    assert_close(torch.searchsorted(sorted_values.to(TPU), empty.to(TPU)), torch.searchsorted(sorted_values, empty))


def test_searchsorted_out():
    boundaries = sorted_boundaries((6,), torch.float32)
    values = make((3, 2))
    out = torch.empty(0, dtype=torch.int64, device=TPU)
    torch.searchsorted(boundaries.to(TPU), values.to(TPU), out=out)
    assert_close(out, torch.searchsorted(boundaries, values))


def test_searchsorted_errors():
    cases = [
        (dict(), (3, 4), (2, 4), "boundaries tensor should be 1 dimension or the first N-1 dimensions"),
        (dict(side="left", right=True), (5,), (3,), "side and right can't be set to opposites"),
        (dict(side="middle"), (5,), (3,), "side can only be 'left' or 'right' but got middle"),
        (dict(sorter=torch.arange(4)), (5,), (3,), "boundary and sorter must have the same size"),
        (dict(sorter=torch.arange(5).int()), (5,), (3,), "sorter must be a tensor of long dtype but got dtype Int"),
    ]
    for kwargs, boundary_shape, value_shape, message in cases:
        boundaries, values = make(boundary_shape), make(value_shape)
        with pytest.raises(RuntimeError, match=message):
            torch.searchsorted(boundaries, values, **kwargs)
        if "sorter" in kwargs:
            kwargs["sorter"] = kwargs["sorter"].to(TPU)
        with pytest.raises(RuntimeError, match=message):
            torch.searchsorted(boundaries.to(TPU), values.to(TPU), **kwargs)


@pytest.mark.parametrize("dtype", SEARCH_DTYPES)
@pytest.mark.parametrize("right", [False, True])
def test_bucketize(dtype, right):
    boundaries = sorted_boundaries((7,), dtype)
    values = make((3, 5), dtype, low=-6, high=6)
    expected = torch.bucketize(values, boundaries, right=right)
    assert_close(torch.bucketize(values.to(TPU), boundaries.to(TPU), right=right), expected)
    expected = torch.bucketize(values, boundaries, right=right, out_int32=True)
    assert_close(torch.bucketize(values.to(TPU), boundaries.to(TPU), right=right, out_int32=True), expected)


def test_bucketize_scalar_promotion_noncontiguous_and_errors():
    boundaries = sorted_boundaries((6,), torch.int64)
    assert_close(torch.bucketize(2.5, boundaries.to(TPU)), torch.bucketize(2.5, boundaries))
    float_values = make((4, 3), low=-6, high=6)
    expected = torch.bucketize(float_values, boundaries)
    assert_close(torch.bucketize(noncontiguous(float_values.to(TPU)), boundaries.to(TPU)), expected)
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(make((3,)), make((2, 2)))
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(make((3,)).to(TPU), make((2, 2)).to(TPU))


# ---- trace ----


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64])
@pytest.mark.parametrize("shape", [(4, 4), (3, 6), (6, 2)])
def test_trace(dtype, shape):
    x = make(shape, dtype)
    tolerance = dict(atol=5e-2, rtol=1.6e-2) if dtype == torch.bfloat16 else {}
    assert_close(torch.trace(x.to(TPU)), torch.trace(x), **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_trace_gradient_noncontiguous(dtype):
    x = make((5, 5), dtype)
    cpu = x.clone().requires_grad_()
    leaf = x.to(TPU).requires_grad_()
    expected = torch.trace(cpu.t())
    actual = torch.trace(leaf.t())
    assert_close(actual, expected, atol=5e-2)
    expected.backward()
    actual.backward()
    assert_close(leaf.grad, cpu.grad)


def test_trace_empty_and_errors():
    assert_close(torch.trace(torch.empty(0, 3).to(TPU)), torch.trace(torch.empty(0, 3)))
    with pytest.raises(RuntimeError, match="trace: expected a matrix, but got tensor with dim 3"):
        torch.trace(torch.ones(2, 2, 2))
    # The meta function's message lacks the CPU's "trace: " prefix.
    with pytest.raises(RuntimeError, match="expected a matrix, but got tensor with dim 3"):
        torch.trace(torch.ones(2, 2, 2, device=TPU))
    for device in ("cpu", TPU):
        with pytest.raises(NotImplementedError, match="\"trace\" not implemented for 'Bool'"):
            torch.trace(torch.ones(2, 2, dtype=torch.bool, device=device))


# ---- linalg_cross ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_cross(dtype, dim):
    shape = {-1: (4, 3), 0: (3, 5), 1: (2, 3, 4)}[dim]
    a, b = make(shape, dtype), make(shape, dtype)
    tolerance = dict(atol=0.1, rtol=0.02) if dtype in (torch.bfloat16, torch.float16) else {}
    assert_close(torch.linalg.cross(a.to(TPU), b.to(TPU), dim=dim), torch.linalg.cross(a, b, dim=dim), **tolerance)
    assert_close(torch.cross(a.to(TPU), b.to(TPU), dim=dim), torch.cross(a, b, dim=dim), **tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cross_broadcast_gradients_noncontiguous(dtype):
    # b is read through its transpose, a non-contiguous view of the leaf.
    a, b = make((4, 1, 3), dtype), make((1, 3, 5), dtype)
    cpu_a, cpu_b = a.clone().requires_grad_(), b.clone().requires_grad_()
    leaf_a, leaf_b = a.to(TPU).requires_grad_(), b.to(TPU).requires_grad_()
    expected = torch.linalg.cross(cpu_a, cpu_b.transpose(1, 2))
    actual = torch.linalg.cross(leaf_a, leaf_b.transpose(1, 2))
    tolerance = dict(atol=0.1, rtol=0.02) if dtype == torch.bfloat16 else {}
    assert_close(actual, expected, **tolerance)
    seed = make(expected.shape, dtype)
    expected.backward(seed)
    actual.backward(seed.to(TPU))
    assert_close(leaf_a.grad, cpu_a.grad, **tolerance)
    assert_close(leaf_b.grad, cpu_b.grad, **tolerance)
    x, y = make((3, 6)), make((3, 6))
    assert_close(
        torch.linalg.cross(noncontiguous(x.to(TPU)), noncontiguous(y.to(TPU)), dim=0), torch.linalg.cross(x, y, dim=0)
    )


def test_cross_out_empty_and_errors():
    a, b = make((2, 3)), make((2, 3))
    out = torch.empty(0, device=TPU)
    torch.linalg.cross(a.to(TPU), b.to(TPU), out=out)
    assert_close(out, torch.linalg.cross(a, b))
    empty = torch.empty(0, 3)
    assert_close(torch.linalg.cross(empty.to(TPU), empty.to(TPU)), torch.linalg.cross(empty, empty))
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(make((2, 4)), make((2, 4)))
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(make((2, 4)).to(TPU), make((2, 4)).to(TPU))
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.linalg.cross(make((2, 3)).to(TPU), make((2, 3)).to(TPU), dim=2)
