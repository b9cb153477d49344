"""unique (sorted, inverse, counts, along a dim) and unique_consecutive on tpu against the CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool]


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def assert_all_close(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e)


def repeated(shape, dtype):
    """Values from a small range, so there are many repeats."""
    x = make(shape, dtype, low=0, high=5)
    return x.round() if dtype.is_floating_point else x


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique(dtype):
    x = repeated((6, 7), dtype)
    for sorted_ in (True, False):
        expected = torch.unique(x, sorted=sorted_, return_inverse=True, return_counts=True)
        actual = torch.unique(x.to(TPU), sorted=sorted_, return_inverse=True, return_counts=True)
        assert_all_close(actual, expected)
    assert_close(torch.unique(x.to(TPU)), torch.unique(x))


def test_unique_unrequested_outputs_noncontiguous_and_nan():
    x = repeated((5, 8), torch.float32)
    for inverse in (False, True):
        for counts in (False, True):
            expected = torch._unique2(x, return_inverse=inverse, return_counts=counts)
            actual = torch._unique2(noncontiguous(x.to(TPU)), return_inverse=inverse, return_counts=counts)
            assert_all_close(actual, expected)
    # Each NaN is its own value, as on the CPU.
    nan = float("nan")
    y = torch.tensor([3.0, nan, 1.0, 3.0, nan, -0.5])
    assert_all_close(torch.unique(y.to(TPU), return_counts=True), torch.unique(y, return_counts=True))
    legacy = torch.ops.aten._unique(x, True, True)
    assert_all_close(torch.ops.aten._unique(x.to(TPU), True, True), legacy)


def test_unique_empty_and_0d():
    for x in (torch.empty(0), torch.empty(2, 0), torch.tensor(2.5), torch.tensor([7])):
        expected = torch.unique(x, return_inverse=True, return_counts=True)
        assert_all_close(torch.unique(x.to(TPU), return_inverse=True, return_counts=True), expected)
        expected = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
        assert_all_close(torch.unique_consecutive(x.to(TPU), return_inverse=True, return_counts=True), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique_dim(dtype):
    x = make((7, 3, 2), dtype, low=0, high=2)
    for dim in (0, 1, -1):
        expected = torch.unique(x, dim=dim, return_inverse=True, return_counts=True)
        assert_all_close(torch.unique(x.to(TPU), dim=dim, return_inverse=True, return_counts=True), expected)
        assert_close(torch.unique(x.to(TPU), dim=dim), torch.unique(x, dim=dim))
    aten = torch.ops.aten.unique_dim(x, 0)
    assert_all_close(torch.ops.aten.unique_dim(noncontiguous(x.to(TPU)), 0), aten)


def test_unique_dim_empty_and_errors():
    empty = torch.zeros(0, 3)
    expected = torch.unique(empty, dim=0, return_inverse=True, return_counts=True)
    assert_all_close(torch.unique(empty.to(TPU), dim=0, return_inverse=True, return_counts=True), expected)
    for x, dim in [(torch.zeros(2, 0), 0), (torch.tensor(1.0), 0), (torch.ones(2, 2), 2), (torch.zeros(0, 0), 0)]:
        with pytest.raises(Exception) as cpu:
            torch.unique(x, dim=dim)
        with pytest.raises(type(cpu.value)) as tpu:
            torch.unique(x.to(TPU), dim=dim)
        assert str(cpu.value) in str(tpu.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_consecutive(dtype):
    x = repeated((40,), dtype)
    x = x.sort().values[torch.randperm(40)[:30].sort().values]  # runs of repeats
    expected = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
    assert_all_close(torch.unique_consecutive(x.to(TPU), return_inverse=True, return_counts=True), expected)
    assert_close(torch.unique_consecutive(x.to(TPU)), torch.unique_consecutive(x))
    shuffled = repeated((4, 6), dtype)
    expected = torch.unique_consecutive(shuffled, return_counts=True)
    assert_all_close(torch.unique_consecutive(noncontiguous(shuffled.to(TPU)), return_counts=True), expected)


def test_unique_consecutive_dim():
    x = make((3, 6, 2), low=0, high=2).round()
    x = x[:, [0, 0, 1, 1, 1, 2]]  # repeated slices along dim 1
    for dim in (0, 1, 2):
        for inverse, counts in [(False, False), (True, True)]:
            expected = torch.ops.aten.unique_consecutive(x, inverse, counts, dim)
            actual = torch.ops.aten.unique_consecutive(x.to(TPU), inverse, counts, dim)
            assert_all_close(actual, expected)
    nan = torch.tensor([[float("nan")], [float("nan")], [1.0]])
    expected = torch.unique_consecutive(nan, dim=0, return_counts=True)
    assert_all_close(torch.unique_consecutive(nan.to(TPU), dim=0, return_counts=True), expected)
    with pytest.raises(RuntimeError, match="There are 0 sized dimensions"):
        torch.unique_consecutive(torch.zeros(2, 0, device=TPU), dim=0)
