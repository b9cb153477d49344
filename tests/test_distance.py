"""torch.cdist (_cdist_forward/_cdist_backward), torch.pdist (_pdist_forward/_pdist_backward),
F.pairwise_distance and F.cosine_similarity against PyTorch on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

ORDERS = [0.0, 1.0, 2.0, math.inf, 0.5, 1.5, 3.0]


def _leaf(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.clone().requires_grad_(), x.to(TPU).requires_grad_()


def _no_fallbacks():
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def _check_cdist(shape1, shape2, p, dtype=torch.float32, **kwargs):
    torch_tpu.metrics.reset()
    a, at = _leaf(make(shape1, dtype))
    b, bt = _leaf(make(shape2, dtype))
    y, yt = torch.cdist(a, b, p, **kwargs), torch.cdist(at, bt, p, **kwargs)
    # Sums of |d|^p and its root: a few ulp more than one elementwise op.
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    assert_close(yt, y, **tolerance)
    grad = make(y.shape, dtype)
    y.backward(grad)
    yt.backward(grad.to(TPU))
    assert_close(at.grad, a.grad, **tolerance)
    assert_close(bt.grad, b.grad, **tolerance)
    _no_fallbacks()


@pytest.mark.parametrize("p", ORDERS)
def test_cdist(p):
    _check_cdist((5, 4), (6, 4), p)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, math.inf, 0.7])
def test_cdist_broadcast_batch_float64(p):
    _check_cdist((2, 1, 5, 3), (3, 7, 3), p, torch.float64)


@pytest.mark.parametrize(
    "mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"]
)
def test_cdist_compute_modes(mode):
    # 30 rows: past the 25 at which the default mode takes the matmul form.
    _check_cdist((30, 4), (6, 4), 2.0, compute_mode=mode)
    _check_cdist((2, 5, 3), (2, 4, 3), 2.0, compute_mode=mode)


def test_cdist_noncontiguous_and_direct_ops():
    torch_tpu.metrics.reset()
    a, b = make((6, 5)), make((4, 5))
    assert_close(torch.cdist(noncontiguous(a.to(TPU)), noncontiguous(b.to(TPU)), 1.0), torch.cdist(a, b, 1.0))
    # compute_mode 2 (never the matmul form) at the op itself, and its out= variant.
    expected = torch.ops.aten._cdist_forward(a, b, 2.0, 2)
    out = torch.empty(0, device=TPU)
    torch.ops.aten._cdist_forward.out(a.to(TPU), b.to(TPU), 2.0, 2, out=out)
    assert_close(out, expected)
    grad = make(expected.shape)
    assert_close(
        torch.ops.aten._cdist_backward(grad.to(TPU), a.to(TPU), b.to(TPU), 2.0, out),
        torch.ops.aten._cdist_backward(grad, a, b, 2.0, expected),
    )
    _no_fallbacks()


def test_cdist_equal_rows_have_zero_gradient():
    torch_tpu.metrics.reset()
    rows = make((3, 4))
    for p in [2.0, 0.5, 3.0, math.inf]:
        a, at = _leaf(rows)
        y, yt = torch.cdist(a, rows, p), torch.cdist(at, rows.to(TPU), p)
        assert_close(yt, y)
        y.sum().backward()
        yt.sum().backward()
        assert_close(at.grad, a.grad)
    _no_fallbacks()


def test_cdist_empty():
    torch_tpu.metrics.reset()
    assert_close(torch.cdist(make((0, 4)).to(TPU), make((6, 4)).to(TPU)), torch.cdist(make((0, 4)), make((6, 4))))
    # No columns: every distance is zero.
    assert_close(torch.cdist(make((3, 0)).to(TPU), make((2, 0)).to(TPU), 1.5), torch.zeros(3, 2))
    _no_fallbacks()


def test_cdist_errors():
    a, b = make((3, 4)), make((2, 4))
    with pytest.raises(NotImplementedError, match="\"cdist\" not implemented for 'BFloat16'"):
        torch.cdist(a.bfloat16(), b.bfloat16())
    with pytest.raises(NotImplementedError, match="\"cdist\" not implemented for 'BFloat16'"):
        torch.cdist(a.bfloat16().to(TPU), b.bfloat16().to(TPU))
    cases = [
        # The CPU names the dtype "Long", PyTorch's meta function (which checks on tpu) "torch.int64".
        (lambda x, y: torch.cdist(x.long(), y.long()), "cdist only supports floating-point dtypes, X1 got: "),
        (lambda x, y: torch.cdist(x, y, -1.0), "cdist only supports non-negative p values"),
        (lambda x, y: torch.cdist(x, y[:, :3]), "X1 and X2 must have the same number of columns. X1: 4 X2: 3"),
        (lambda x, y: torch.cdist(x[0], y), "cdist only supports at least 2D tensors, X1 got: 1D"),
    ]
    for fn, message in cases:
        with pytest.raises(RuntimeError, match=message):
            fn(a, b)
        with pytest.raises(RuntimeError, match=message):
            fn(a.to(TPU), b.to(TPU))


@pytest.mark.parametrize("p", ORDERS)
def test_pdist(p):
    torch_tpu.metrics.reset()
    x, xt = _leaf(make((7, 3)))
    y, yt = F.pdist(x, p), F.pdist(xt, p)
    assert_close(yt, y, rtol=1e-5, atol=1e-5)
    grad = make(y.shape)
    y.backward(grad)
    yt.backward(grad.to(TPU))
    assert_close(xt.grad, x.grad, rtol=1e-5, atol=1e-5)
    _no_fallbacks()


def test_pdist_float64_repeated_rows_and_small_inputs():
    torch_tpu.metrics.reset()
    rows = make((4, 5), torch.float64)
    x, xt = _leaf(torch.cat([rows, rows[:2]]))  # equal rows: zero distances, zero gradients
    y, yt = torch.pdist(x), torch.pdist(xt)
    assert_close(yt, y)
    y.backward(torch.ones_like(y))
    yt.backward(torch.ones_like(yt))
    assert_close(xt.grad, x.grad)
    for n in [0, 1]:
        assert_close(F.pdist(make((n, 3)).to(TPU)), F.pdist(make((n, 3))))
    _no_fallbacks()


@pytest.mark.parametrize("p", ORDERS)
def test_distances_with_nan_and_inf_entries(p):
    # A NaN entry makes the distances from its row NaN in each order, except cdist's inf-norm,
    # whose CPU kernel passes over it (std::max); an infinite one makes them inf, or NaN between
    # two such rows (inf - inf).
    x = make((6, 4))
    x[1, 2], x[4, 0], x[5, 0] = math.nan, math.inf, math.inf
    y = make((5, 4))
    y[3, 1] = math.nan
    assert_close(F.pdist(x.to(TPU), p), F.pdist(x, p), rtol=1e-5, atol=1e-5)
    assert_close(torch.cdist(x.to(TPU), y.to(TPU), p), torch.cdist(x, y, p), rtol=1e-5, atol=1e-5)


def test_pdist_errors():
    with pytest.raises(NotImplementedError, match="\"pdist\" not implemented for 'BFloat16'"):
        F.pdist(make((3, 2), torch.bfloat16).to(TPU))
    for fn, message in [
        (lambda x: F.pdist(x, -1.0), "pdist only supports non-negative p values"),
        (lambda x: F.pdist(x[None]), "pdist only supports 2D tensors, got: 3D"),
        (lambda x: F.pdist(x.long()), "pdist only supports floating-point dtypes"),
    ]:
        with pytest.raises(RuntimeError, match=message):
            fn(make((3, 2)))
        with pytest.raises(RuntimeError, match=message):
            fn(make((3, 2)).to(TPU))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_pairwise_distance(p):
    torch_tpu.metrics.reset()
    a, at = _leaf(make((5, 4)))
    b = make((1, 4))
    y, yt = F.pairwise_distance(a, b, p), F.pairwise_distance(at, b.to(TPU), p)
    assert_close(yt, y, rtol=1e-5, atol=1e-5)
    y.sum().backward()
    yt.sum().backward()
    assert_close(at.grad, a.grad, rtol=1e-5, atol=1e-5)
    _no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cosine_similarity(dtype):
    torch_tpu.metrics.reset()
    a, at = _leaf(make((2, 5, 4), dtype))
    b, bt = _leaf(make((5, 4), dtype))
    y, yt = F.cosine_similarity(a, b, dim=-1), F.cosine_similarity(at, bt, dim=-1)
    assert_close(yt, y)
    y.sum().backward()
    yt.sum().backward()
    assert_close(at.grad, a.grad)
    assert_close(bt.grad, b.grad)
    _no_fallbacks()
