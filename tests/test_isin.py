"""Lowerings in csrc/ops/membership.cc: isin (Transformers' generate() checks special tokens with it)."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8]


def small_values(shape, dtype, seed):
    # Whole numbers in a narrow range, so many elements occur among the test elements.
    values = make(shape, dtype, low=0, high=6, seed=seed)
    return values.round() if dtype.is_floating_point else values


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_isin_tensor_tensor(dtype, invert):
    elements = small_values((3, 5), dtype, seed=1)
    tests = small_values((2, 2), dtype, seed=2)
    expected = torch.isin(elements, tests, invert=invert)
    assert_close(torch.isin(elements.to(TPU), tests.to(TPU), invert=invert), expected)
    assert expected.any() and not expected.all()  # the inputs exercise both outcomes


@pytest.mark.parametrize(
    ("elements_dtype", "tests_dtype"),
    [
        (torch.int64, torch.float32),
        (torch.int32, torch.int64),
        (torch.int32, torch.float16),
        (torch.uint8, torch.int64),
    ],
)
def test_isin_promotes_both_sides(elements_dtype, tests_dtype):
    elements = torch.tensor([1, 2, 3, 200], dtype=elements_dtype)
    tests = torch.tensor([2.5, 3.0, 200.0, -56.0]).to(tests_dtype)
    assert_close(torch.isin(elements.to(TPU), tests.to(TPU)), torch.isin(elements, tests))


@pytest.mark.parametrize("scalar", [2, 2.0, 2.5])
def test_isin_tensor_scalar_and_scalar_tensor(scalar):
    elements = torch.tensor([[1, 2], [3, 2]])
    assert_close(torch.isin(elements.to(TPU), scalar), torch.isin(elements, scalar))
    assert_close(torch.isin(elements.to(TPU), scalar, invert=True), torch.isin(elements, scalar, invert=True))
    assert_close(torch.isin(scalar, elements.to(TPU)), torch.isin(scalar, elements))


def test_isin_noncontiguous_inputs():
    elements = small_values((4, 6), torch.float32, seed=3)
    tests = small_values((3, 2), torch.float32, seed=4)
    expected = torch.isin(elements, tests)
    actual = torch.isin(noncontiguous(elements.to(TPU)), noncontiguous(tests.to(TPU)))
    assert_close(actual, expected)


def test_isin_zero_dim_empty_and_nan():
    value = torch.tensor(3)
    tests = torch.tensor([1, 3])
    assert_close(torch.isin(value.to(TPU), tests.to(TPU)), torch.isin(value, tests))
    assert_close(torch.isin(tests.to(TPU), value.to(TPU)), torch.isin(tests, value))
    empty = torch.tensor([], dtype=torch.int64)
    assert_close(torch.isin(tests.to(TPU), empty.to(TPU)), torch.isin(tests, empty))
    assert_close(torch.isin(empty.to(TPU), tests.to(TPU)), torch.isin(empty, tests))
    # NaN is never equal to NaN; -0.0 equals 0.0.
    floats = torch.tensor([float("nan"), 0.0, 1.0])
    other = torch.tensor([float("nan"), -0.0])
    assert_close(torch.isin(floats.to(TPU), other.to(TPU)), torch.isin(floats, other))


def test_isin_assume_unique_and_out():
    elements = torch.tensor([4, 1, 7, 3])
    tests = torch.tensor([7, 4])
    expected = torch.isin(elements, tests, assume_unique=True)
    assert_close(torch.isin(elements.to(TPU), tests.to(TPU), assume_unique=True), expected)
    out = torch.empty(4, dtype=torch.bool, device=TPU)
    result = torch.isin(elements.to(TPU), tests.to(TPU), out=out)
    assert result is out
    assert_close(out, torch.isin(elements, tests))


def test_isin_rejects_bool_like_cpu():
    flags = torch.tensor([True, False])
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):
        torch.isin(flags, flags)
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):
        torch.isin(flags.to(TPU), flags.to(TPU))
