"""Matrix decompositions and solves on tpu against the CPU: Cholesky, triangular solves, LU and
what is built on it (lu_solve, solve, inv, det, slogdet), with their info outputs, the CPU's
errors and gradients."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous
from linalg_helpers import cpu_error, tpu_leaf, well_conditioned

DTYPES = [torch.float32, torch.float64]
# Decompositions accumulate rounding over n steps: tolerances a few times the elementwise ones.
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def spd(shape, dtype=torch.float32):
    """Well-conditioned symmetric positive definite matrices."""
    a = make(shape, torch.float64, low=-1, high=1)
    n = shape[-1]
    return (a @ a.mT / n + torch.eye(n, dtype=torch.float64)).to(dtype)


def check_grads(fn, inputs, dtype, **tol):
    """Forward and backward of fn against the CPU, with a random upstream gradient."""
    cpu_inputs = [t.detach().clone().requires_grad_() for t in inputs]
    tpu_inputs = [tpu_leaf(t) for t in inputs]
    expected = fn(*cpu_inputs)
    actual = fn(*tpu_inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    tolerance = dict(TOL[dtype], **tol)
    grads = []
    for e, a in zip(expected, actual, strict=True):
        if not e.dtype.is_floating_point:
            continue
        assert_close(a, e, **tolerance)
        grads.append(make(e.shape, e.dtype, low=-1, high=1))
    floating = [e for e in expected if e.dtype.is_floating_point]
    torch.autograd.backward(floating, grads)
    torch.autograd.backward([a for a in actual if a.dtype.is_floating_point], [g.to(TPU) for g in grads])
    for c, t in zip(cpu_inputs, tpu_inputs, strict=True):
        assert_close(t.grad, c.grad, **tolerance)


# ---- Cholesky ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_batched_with_grad(dtype, upper):
    a = spd((2, 3, 5, 5), dtype)
    check_grads(lambda x: torch.linalg.cholesky(x, upper=upper), [a], dtype)
    result = torch.linalg.cholesky_ex(a.to(TPU), upper=upper)
    assert_close(result.info, torch.zeros(2, 3, dtype=torch.int32))


def test_cholesky_reads_one_triangle_and_noncontiguous():
    a = spd((4, 4))
    lopsided_lower = torch.tril(a) + torch.triu(make((4, 4)), 1)
    assert_close(
        torch.linalg.cholesky(lopsided_lower.to(TPU)), torch.linalg.cholesky(lopsided_lower), **TOL[torch.float32]
    )
    lopsided_upper = torch.triu(a) + torch.tril(make((4, 4)), -1)
    assert_close(
        torch.linalg.cholesky(noncontiguous(lopsided_upper.to(TPU)), upper=True),
        torch.linalg.cholesky(lopsided_upper, upper=True),
        **TOL[torch.float32],
    )
    out = torch.empty(0, device=TPU)
    torch.linalg.cholesky(a.to(TPU), out=out)
    assert_close(out, torch.linalg.cholesky(a), **TOL[torch.float32])


def test_cholesky_info_and_error_for_non_positive_definite():
    good = spd((4, 4))
    indefinite = torch.tensor([[1.0, 2, 3, 0], [2, 1, 0, 0], [3, 0, 1, 0], [0, 0, 0, 1]])
    singular = torch.diag(torch.tensor([1.0, 2.0, 3.0, 0.0]))
    nan = good.clone()
    nan[2, 1] = float("nan")
    batch = torch.stack([good, indefinite, singular, nan])
    expected = torch.linalg.cholesky_ex(batch).info
    assert expected.tolist() == [0, 2, 4, 3]
    assert_close(torch.linalg.cholesky_ex(batch.to(TPU)).info, expected)
    assert_close(
        torch.linalg.cholesky_ex(indefinite.to(TPU), upper=True).info,
        torch.linalg.cholesky_ex(indefinite, upper=True).info,
    )
    for matrix in (indefinite, batch):
        kind, message = cpu_error(torch.linalg.cholesky, matrix)
        with pytest.raises(kind, match=re.escape(message)):
            torch.linalg.cholesky(matrix.to(TPU))


def test_cholesky_empty_and_dtype_errors():
    for shape in [(0, 0), (3, 0, 0)]:
        result = torch.linalg.cholesky_ex(torch.empty(shape).to(TPU))
        assert_close(result.L, torch.empty(shape))
        assert_close(result.info, torch.zeros(shape[:-2], dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="\"cholesky_cpu\" not implemented for 'BFloat16'"):
        torch.linalg.cholesky(torch.eye(3, dtype=torch.bfloat16).to(TPU))
    kind, message = cpu_error(torch.linalg.cholesky, torch.eye(3, dtype=torch.long))
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.cholesky(torch.eye(3, dtype=torch.long).to(TPU))


# ---- triangular solves ----


@pytest.mark.parametrize(
    "upper, left, unitriangular", [(False, True, False), (True, True, True), (False, False, True), (True, False, False)]
)
def test_solve_triangular_broadcast_with_grad(upper, left, unitriangular):
    a = well_conditioned((2, 1, 4, 4))
    b = make((3, 4, 5) if left else (3, 5, 4), low=-1, high=1)
    check_grads(
        lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unitriangular),
        [a, b],
        torch.float32,
    )


def test_solve_triangular_f64_noncontiguous_out_empty_and_errors():
    a, b = well_conditioned((3, 3), torch.float64), make((3, 2), torch.float64)
    expected = torch.linalg.solve_triangular(a, b, upper=True)
    actual = torch.linalg.solve_triangular(noncontiguous(a.to(TPU)), noncontiguous(b.to(TPU)), upper=True)
    assert_close(actual, expected, **TOL[torch.float64])
    out = torch.empty(0, dtype=torch.float64, device=TPU)
    torch.linalg.solve_triangular(a.to(TPU), b.to(TPU), upper=True, out=out)
    assert_close(out, expected, **TOL[torch.float64])
    empty = torch.empty(3, 0)
    assert_close(torch.linalg.solve_triangular(a.float().to(TPU), empty.to(TPU), upper=False), torch.empty(3, 0))
    with pytest.raises(NotImplementedError, match="\"triangular_solve_cpu\" not implemented for 'BFloat16'"):
        torch.linalg.solve_triangular(a.bfloat16().to(TPU), b.bfloat16().to(TPU), upper=True)
    kind, message = cpu_error(torch.linalg.solve_triangular, a.float(), make((4, 2)), upper=True)
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.solve_triangular(a.float().to(TPU), make((4, 2)).to(TPU), upper=True)


@pytest.mark.parametrize("upper, transpose", [(True, False), (False, True)])
def test_triangular_solve_with_grad(upper, transpose):
    a, b = well_conditioned((2, 4, 4)), make((4, 3), low=-1, high=1)
    check_grads(lambda y, x: torch.triangular_solve(y, x, upper=upper, transpose=transpose), [b, a], torch.float32)
    result = torch.triangular_solve(b.to(TPU), a.to(TPU), upper=upper, transpose=transpose, unitriangular=True)
    expected = torch.triangular_solve(b, a, upper=upper, transpose=transpose, unitriangular=True)
    assert_close(result.solution, expected.solution, **TOL[torch.float32])
    assert_close(result.cloned_coefficient, expected.cloned_coefficient)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_with_grad(dtype, upper):
    factor = torch.linalg.cholesky(spd((2, 4, 4), dtype), upper=upper)
    b = make((3, 1, 4, 2), dtype, low=-1, high=1)
    check_grads(lambda y, f: torch.cholesky_solve(y, f, upper=upper), [b, factor], dtype)
    check_grads(lambda f: torch.cholesky_inverse(f, upper=upper), [factor], dtype)


def test_cholesky_solve_inverse_dtype_errors():
    eye = torch.eye(3, dtype=torch.bfloat16).to(TPU)
    with pytest.raises(NotImplementedError, match="\"cholesky_solve_cpu\" not implemented for 'BFloat16'"):
        torch.cholesky_solve(eye, eye)
    with pytest.raises(NotImplementedError, match="\"cholesky_inverse_out_cpu\" not implemented for 'BFloat16'"):
        torch.cholesky_inverse(eye)


# ---- LU ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 4, 4), (5, 3), (2, 3, 5)])
def test_lu_factor_matches_getrf(dtype, shape):
    a = make(shape, dtype)
    expected = torch.linalg.lu_factor_ex(a)
    actual = torch.linalg.lu_factor_ex(a.to(TPU))
    assert_close(actual.pivots, expected.pivots)
    assert_close(actual.LU, expected.LU, **TOL[dtype])
    assert_close(actual.info, expected.info)


def test_lu_factor_singular_info_ties_and_noncontiguous():
    # Equal magnitudes: the first row wins, as in LAPACK. Zero columns: info is the first.
    ties = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0], [1.0, 4.0, 2.0]])
    zero_column = torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])
    # Powers of two keep the elimination exact, so the trailing block is exactly zero.
    rank_one = torch.outer(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, -1.0, 2.0]))
    batch = torch.stack([ties, zero_column, rank_one])
    expected = torch.linalg.lu_factor_ex(batch)
    assert expected.info.tolist() == [0, 1, 2]
    actual = torch.linalg.lu_factor_ex(noncontiguous(batch.to(TPU)))
    assert_close(actual.pivots, expected.pivots)
    assert_close(actual.LU, expected.LU, **TOL[torch.float32])
    assert_close(actual.info, expected.info)
    empty = torch.linalg.lu_factor_ex(torch.empty(2, 0, 3).to(TPU))
    assert empty.LU.shape == (2, 0, 3) and empty.pivots.shape == (2, 0)
    assert_close(empty.info, torch.zeros(2, dtype=torch.int32))


def test_lu_factor_errors():
    with pytest.raises(NotImplementedError, match="\"lu_cpu\" not implemented for 'BFloat16'"):
        torch.linalg.lu_factor(torch.eye(3, dtype=torch.bfloat16).to(TPU))
    kind, message = cpu_error(lambda a: torch.linalg.lu_factor(a, pivot=False), torch.eye(3))
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.lu_factor(torch.eye(3).to(TPU), pivot=False)
    singular = torch.zeros(3, 3)
    kind, message = cpu_error(torch.linalg.lu_factor, singular)
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.lu_factor(singular.to(TPU))


@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (3, 5)])
def test_lu_with_grad(shape):
    a = make(shape, low=-1, high=1)
    expected = torch.linalg.lu(a)
    actual = torch.linalg.lu(a.to(TPU))
    assert_close(actual.P, expected.P)
    check_grads(lambda x: torch.linalg.lu(x)[1:], [a], torch.float32)
    lu, pivots = torch.linalg.lu_factor(a)
    for unpacked, reference in zip(
        torch.lu_unpack(lu.to(TPU), pivots.to(TPU)), torch.lu_unpack(lu, pivots), strict=True
    ):
        assert_close(unpacked, reference)


@pytest.mark.parametrize("left, adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_lu_solve_broadcast_with_grad(left, adjoint):
    a = well_conditioned((2, 1, 4, 4))
    b = make((3, 4, 2) if left else (3, 2, 4), low=-1, high=1)
    lu, pivots = torch.linalg.lu_factor(a)
    expected = torch.linalg.lu_solve(lu, pivots, b, left=left, adjoint=adjoint)
    actual = torch.linalg.lu_solve(lu.to(TPU), pivots.to(TPU), b.to(TPU), left=left, adjoint=adjoint)
    assert_close(actual, expected, **TOL[torch.float32])
    check_grads(
        lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, left=left, adjoint=adjoint),
        [a, b],
        torch.float32,
    )


# ---- solve, inv, det, slogdet ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape", [((4, 4), (4,)), ((2, 4, 4), (2, 4)), ((4, 4), (3, 4, 2))])
def test_solve_with_grad(dtype, a_shape, b_shape):
    check_grads(torch.linalg.solve, [well_conditioned(a_shape, dtype), make(b_shape, dtype, low=-1, high=1)], dtype)


def test_solve_left_false_noncontiguous_empty_and_out():
    a, b = well_conditioned((2, 4, 4)), make((2, 3, 4))
    check_grads(lambda x, y: torch.linalg.solve(x, y, left=False), [a, b], torch.float32)
    check_grads(lambda x, y: torch.linalg.solve(x.mT, y), [a, b.mT], torch.float32)
    assert_close(
        torch.linalg.solve(noncontiguous(a.to(TPU)), noncontiguous(b.mT.contiguous().to(TPU))),
        torch.linalg.solve(a, b.mT),
        **TOL[torch.float32],
    )
    out = torch.empty(0, device=TPU)
    torch.linalg.solve(a.to(TPU), b.mT.to(TPU), out=out)
    assert_close(out, torch.linalg.solve(a, b.mT), **TOL[torch.float32])
    empty = torch.empty(2, 4, 0)
    assert_close(torch.linalg.solve(a.to(TPU), empty.to(TPU)), torch.linalg.solve(a, empty))


def test_det_grad_of_noncontiguous_matrix():
    check_grads(lambda x: torch.linalg.det(x.mT), [well_conditioned((4, 4))], torch.float32)


def test_det_slogdet_of_noncontiguous_matrix():
    a = make((2, 4, 4), low=-1, high=1)
    assert_close(torch.linalg.det(noncontiguous(a.to(TPU))), torch.linalg.det(a), **TOL[torch.float32])
    sign, logabsdet = torch.linalg.slogdet(noncontiguous(a.to(TPU)))
    expected = torch.linalg.slogdet(a)
    assert_close(sign, expected.sign)
    assert_close(logabsdet, expected.logabsdet, **TOL[torch.float32])


def test_solve_and_inv_singular_raise_the_cpu_error():
    singular = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    b = make((3, 2))
    for fn, args in [(torch.linalg.solve, (singular, b)), (torch.linalg.inv, (singular,))]:
        kind, message = cpu_error(fn, *args)
        with pytest.raises(kind, match=re.escape(message)):
            fn(*[t.to(TPU) for t in args])
    batch = torch.stack([well_conditioned((3, 3)), singular])
    expected = torch.linalg.inv_ex(batch).info
    assert_close(torch.linalg.inv_ex(batch.to(TPU)).info, expected)
    kind, message = cpu_error(torch.linalg.inv, batch)
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.inv(batch.to(TPU))


@pytest.mark.parametrize("dtype", DTYPES)
def test_inv_with_grad(dtype):
    check_grads(torch.linalg.inv, [well_conditioned((2, 4, 4), dtype)], dtype)
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported"):
        torch.linalg.inv(torch.eye(3, dtype=torch.bfloat16).to(TPU))


@pytest.mark.parametrize("dtype", DTYPES)
def test_det_slogdet_logdet_with_grad(dtype):
    a = make((3, 4, 4), dtype, low=-1, high=1)
    check_grads(torch.linalg.det, [a], dtype)
    check_grads(torch.linalg.slogdet, [a], dtype)
    spd_batch = spd((2, 4, 4), dtype)
    check_grads(torch.logdet, [spd_batch], dtype)


def test_det_singular_empty_and_errors():
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    batch = torch.stack([singular, -torch.eye(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]])])
    assert_close(torch.linalg.det(batch.to(TPU)), torch.linalg.det(batch))
    sign, logabsdet = torch.linalg.slogdet(batch.to(TPU))
    expected = torch.linalg.slogdet(batch)
    assert_close(sign, expected.sign)
    assert_close(logabsdet, expected.logabsdet)
    assert_close(torch.linalg.det(torch.empty(2, 0, 0).to(TPU)), torch.ones(2))
    with pytest.raises(NotImplementedError, match="\"lu_cpu\" not implemented for 'BFloat16'"):
        torch.linalg.det(torch.eye(3, dtype=torch.bfloat16).to(TPU))
    kind, message = cpu_error(torch.linalg.det, torch.eye(3, dtype=torch.long))
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.det(torch.eye(3, dtype=torch.long).to(TPU))
