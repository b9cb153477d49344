"""Sorting and order statistics on tpu against the CPU: sort (and argsort, msort, which decompose
to it), topk, kthvalue, median and nanmedian, forward and backward.

Values must match exactly. Indices match the CPU's exactly where the CPU defines them (a stable
sort, distinct values); where ties make them implementation-defined, they must select the values.
"""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
SORTABLE = FLOATS + [torch.int32, torch.int64, torch.uint8, torch.bool]
ORDERED = FLOATS + [torch.int32, torch.int64]  # topk, kthvalue, median: no bool on the CPU

NAN = float("nan")
INF = float("inf")


def with_specials(x: torch.Tensor) -> torch.Tensor:
    """Adds NaN, +-inf, +-0 and repeated values to a float tensor (in place of some elements)."""
    flat = x.reshape(-1).clone()
    specials = torch.tensor([NAN, INF, -INF, 0.0, -0.0, NAN, 1.0, 1.0], dtype=x.dtype)
    positions = torch.randperm(flat.numel())[: min(specials.numel(), flat.numel())]
    flat[positions] = specials[: positions.numel()]
    return flat.reshape(x.shape)


def sample(shape, dtype, ties: bool = True) -> torch.Tensor:
    if dtype.is_floating_point:
        x = make(shape, dtype)
        return with_specials(x) if ties else x
    if dtype == torch.bool:
        return make(shape, dtype)
    return make(shape, dtype, low=0, high=6)  # many ties


def distinct(shape, dtype=torch.float32) -> torch.Tensor:
    """Distinct values (exact in every float type), so every index is defined."""
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n).to(torch.float32) - n / 2).reshape(shape).to(dtype)


def assert_indices_select(x: torch.Tensor, dim: int, indices, values) -> None:
    """The tpu indices pick, from the CPU input, exactly the values."""
    picked = x.gather(dim, indices.cpu()) if x.dim() > 0 else x
    torch.testing.assert_close(picked, values.cpu(), equal_nan=True, rtol=0, atol=0)


# ---- sort ----


@pytest.mark.parametrize("dtype", SORTABLE)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dtype, dim, descending):
    x = sample((7, 9, 5), dtype)
    values, indices = torch.sort(x.to(TPU), dim=dim, descending=descending, stable=True)
    expected = torch.sort(x, dim=dim, descending=descending, stable=True)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_unstable(dtype, descending):
    x = sample((6, 40), dtype)
    values, indices = torch.sort(x.to(TPU), descending=descending)
    expected = torch.sort(x, descending=descending)
    assert_close(values, expected.values)
    assert indices.device.type == "tpu" and indices.dtype == torch.int64
    assert_indices_select(x, -1, indices, values)


def test_sort_nan_is_largest():
    x = torch.tensor([3.0, NAN, -INF, 1.0, NAN, INF, -0.0, 0.0])
    for descending in (False, True):
        values, indices = torch.sort(x.to(TPU), descending=descending, stable=True)
        expected = torch.sort(x, descending=descending, stable=True)
        assert_close(values, expected.values)
        assert_close(indices, expected.indices)


def test_sort_noncontiguous_and_out():
    x = noncontiguous(sample((5, 8), torch.float32).to(TPU))
    expected = torch.sort(x.cpu(), dim=0, stable=True)
    values = torch.empty(0, device=TPU)
    indices = torch.empty(0, dtype=torch.long, device=TPU)
    result = torch.sort(x, dim=0, stable=True, out=(values, indices))
    assert result.values is values and result.indices is indices
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("dim", [0, -1])
def test_sort_0d(dim):
    x = torch.tensor(2.5)
    values, indices = torch.sort(x.to(TPU), dim=dim)
    expected = torch.sort(x, dim=dim)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_argsort_and_msort(dtype):
    x = sample((6, 7), dtype)
    for descending in (False, True):
        assert_close(
            torch.argsort(x.to(TPU), dim=0, descending=descending, stable=True),
            torch.argsort(x, dim=0, descending=descending, stable=True),
        )
    assert_close(torch.msort(x.to(TPU)), torch.msort(x))


def test_sort_error():
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.sort(torch.ones(3, 4, device=TPU), dim=2)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_backward(dtype, descending):
    x = distinct((5, 6), dtype)
    weights = make((5, 6), dtype)
    cpu_x = x.clone().requires_grad_()
    (torch.sort(cpu_x, dim=0, descending=descending).values * weights).sum().backward()
    tpu_x = x.to(TPU).requires_grad_()
    (torch.sort(tpu_x, dim=0, descending=descending).values * weights.to(TPU)).sum().backward()
    assert_close(tpu_x.grad, cpu_x.grad)
    tpu_x.grad = None
    torch.sort(tpu_x).values.sum().backward()
    assert_close(tpu_x.grad, torch.ones_like(x))


# ---- topk ----


@pytest.mark.parametrize("dtype", ORDERED)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk(dtype, largest, dim):
    x = sample((8, 11), dtype)
    values, indices = torch.topk(x.to(TPU), 3, dim=dim, largest=largest)
    expected = torch.topk(x, 3, dim=dim, largest=largest)
    assert_close(values, expected.values)
    assert_indices_select(x, dim, indices, values)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_distinct_indices(largest):
    x = distinct((4, 30))
    values, indices = torch.topk(x.to(TPU), 7, largest=largest)
    expected = torch.topk(x, 7, largest=largest)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


def test_topk_unsorted_noncontiguous_out():
    x = noncontiguous(distinct((6, 9)).to(TPU))
    values = torch.empty(0, device=TPU)
    indices = torch.empty(0, dtype=torch.long, device=TPU)
    torch.topk(x, 4, dim=0, sorted=False, out=(values, indices))
    expected = torch.topk(x.cpu(), 4, dim=0, sorted=False)
    # sorted=False leaves the order to the implementation: compare as sets per column.
    order = values.cpu().argsort(dim=0)
    expected_order = expected.values.argsort(dim=0)
    assert_close(values.gather(0, order.to(TPU)), expected.values.gather(0, expected_order))
    assert_close(indices.gather(0, order.to(TPU)), expected.indices.gather(0, expected_order))


def test_topk_whole_dim_and_0d():
    x = make((5,))
    assert_close(torch.topk(x.to(TPU), 5).values, torch.topk(x, 5).values)
    scalar = torch.tensor(1.5)
    values, indices = torch.topk(scalar.to(TPU), 1)
    expected = torch.topk(scalar, 1)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


def test_topk_errors():
    x = torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(x.to(TPU), 5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.topk(x.to(TPU), 1, dim=3)


@pytest.mark.parametrize("dtype", FLOATS)
def test_topk_backward(dtype):
    x = distinct((6, 10), dtype)
    weights = make((6, 3), dtype)
    cpu_x = x.clone().requires_grad_()
    (torch.topk(cpu_x, 3).values * weights).sum().backward()
    tpu_x = x.to(TPU).requires_grad_()
    (torch.topk(tpu_x, 3).values * weights.to(TPU)).sum().backward()
    assert_close(tpu_x.grad, cpu_x.grad)
    tpu_x.grad = None
    torch.topk(tpu_x, 2, dim=0, largest=False).values.sum().backward()
    cpu_x.grad = None
    torch.topk(cpu_x, 2, dim=0, largest=False).values.sum().backward()
    assert_close(tpu_x.grad, cpu_x.grad)


# ---- kthvalue, median, nanmedian ----


@pytest.mark.parametrize("dtype", ORDERED)
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(dtype, keepdim):
    x = sample((7, 9), dtype)
    for k, dim in [(1, 0), (4, 1), (9, -1)]:
        values, indices = torch.kthvalue(x.to(TPU), k, dim=dim, keepdim=keepdim)
        expected = torch.kthvalue(x, k, dim=dim, keepdim=keepdim)
        assert_close(values, expected.values)
        gather_indices = indices if keepdim else indices.unsqueeze(dim)
        gather_values = values if keepdim else values.unsqueeze(dim)
        assert_indices_select(x, dim, gather_indices, gather_values)
    distinct_x = distinct((5, 8))
    values, indices = torch.kthvalue(distinct_x.to(TPU), 3, keepdim=keepdim)
    expected = torch.kthvalue(distinct_x, 3, keepdim=keepdim)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


def test_kthvalue_errors_and_out():
    x = torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="selected number k out of range"):
        torch.kthvalue(x.to(TPU), 5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.kthvalue(x.to(TPU), 1, dim=2)
    y = noncontiguous(distinct((4, 6)).to(TPU))
    values = torch.empty(0, device=TPU)
    indices = torch.empty(0, dtype=torch.long, device=TPU)
    torch.kthvalue(y, 2, dim=0, out=(values, indices))
    expected = torch.kthvalue(y.cpu(), 2, dim=0)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("dtype", ORDERED)
@pytest.mark.parametrize("size", [8, 9])  # even and odd rows: the lower median
def test_median_dim(op, dtype, size):
    x = sample((6, size), dtype)
    for dim, keepdim in [(1, False), (0, True), (-1, True)]:
        values, indices = op(x.to(TPU), dim=dim, keepdim=keepdim)
        expected = op(x, dim=dim, keepdim=keepdim)
        assert_close(values, expected.values)
        gather_indices = indices if keepdim else indices.unsqueeze(dim)
        gather_values = values if keepdim else values.unsqueeze(dim)
        assert_indices_select(x, dim, gather_indices, gather_values)
    distinct_x = distinct((5, size))
    values, indices = op(distinct_x.to(TPU), 1)
    expected = op(distinct_x, 1)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
def test_median_nan_rows(op):
    x = torch.tensor([[NAN, 1.0, 2.0, NAN], [NAN, NAN, NAN, NAN], [3.0, NAN, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0]])
    values, indices = op(x.to(TPU), 1)
    expected = op(x, 1)
    assert_close(values, expected.values)
    # median returns the first NaN of a row; for an all-NaN row the CPU's index is arbitrary.
    defined = slice(None) if op is torch.median else [0, 2, 3]
    assert_close(indices[defined], expected.indices[defined])
    assert_indices_select(x, 1, indices.unsqueeze(1), values.unsqueeze(1))


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("dtype", ORDERED)
def test_median_all(op, dtype):
    x = sample((5, 7), dtype)
    assert_close(op(x.to(TPU)), op(x))
    assert_close(op(noncontiguous(x.to(TPU))), op(x))
    scalar = torch.tensor(3.0)
    assert_close(op(scalar.to(TPU)), op(scalar))
    values, indices = op(scalar.to(TPU), 0)
    expected = op(scalar, 0)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


def test_median_out_and_error():
    x = distinct((4, 5))
    out = torch.empty((), device=TPU)
    result = torch.ops.aten.median.out(x.to(TPU), out=out)
    assert result is out
    assert_close(out, torch.median(x))
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.median(x.to(TPU), 2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_order_statistics_backward(dtype):
    x = distinct((5, 7), dtype)
    for fn in [
        lambda t: torch.kthvalue(t, 3, dim=1).values,
        lambda t: torch.median(t, 0, keepdim=True).values,
        lambda t: torch.nanmedian(t, 1).values,
        lambda t: torch.median(t).reshape(1),
    ]:
        cpu_x = x.clone().requires_grad_()
        out = fn(cpu_x)
        weights = make(out.shape, dtype)
        (out * weights).sum().backward()
        tpu_x = x.to(TPU).requires_grad_()
        (fn(tpu_x) * weights.to(TPU)).sum().backward()
        assert_close(tpu_x.grad, cpu_x.grad)
