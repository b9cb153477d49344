"""Householder QR on tpu against the CPU (LAPACK): geqrf's compact form, householder_product
(orgqr), ormqr, linalg.qr in every mode (and torch.qr), linalg.lstsq's QR driver (gels), with
the CPU's errors and gradients."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous
from linalg_helpers import assert_same_error, tpu_leaf, well_conditioned

DTYPES = [torch.float32, torch.float64]
# Factorizations accumulate rounding over n reflectors: tolerances a few times the elementwise ones.
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}
# Gradients go through several factorizations and solves (in f32 their rounding compounds).
GRAD_TOL = {torch.float32: dict(rtol=1e-3, atol=1e-4), torch.float64: dict(rtol=1e-9, atol=1e-9)}


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def check_grads(fn, inputs, dtype, tol=None):
    """Forward and backward of fn against the CPU, with a random upstream gradient."""
    cpu_inputs = [t.detach().clone().requires_grad_() for t in inputs]
    tpu_inputs = [tpu_leaf(t) for t in inputs]
    expected, actual = fn(*cpu_inputs), fn(*tpu_inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    grads = []
    for e, a in zip(expected, actual, strict=True):
        assert_close(a, e, **TOL[dtype])
        grads.append(make(e.shape, e.dtype, low=-1, high=1))
    torch.autograd.backward(expected, grads)
    torch.autograd.backward(actual, [g.to(TPU) for g in grads])
    for c, t in zip(cpu_inputs, tpu_inputs, strict=True):
        assert_close(t.grad, c.grad, **(tol or GRAD_TOL[dtype]))


# ---- geqrf ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 4, 4)])
def test_geqrf_matches_lapack(dtype, shape):
    a = make(shape, dtype)
    expected = torch.geqrf(a)
    actual = torch.geqrf(a.to(TPU))
    assert_close(actual.a, expected.a, **TOL[dtype])
    assert_close(actual.tau, expected.tau, **TOL[dtype])
    assert actual.a.stride() == expected.a.stride()  # column-major, as LAPACK leaves it


def test_geqrf_trivial_reflectors_noncontiguous_and_out():
    # Columns already zero below the diagonal get tau = 0 and keep their sign (LAPACK's dlarfg);
    # a zero column too.
    upper = torch.triu(make((4, 4))) - 4 * torch.eye(4)
    zero_column = make((4, 3))
    zero_column[:, 1] = 0
    for a in (upper, zero_column, torch.zeros(3, 3)):
        expected = torch.geqrf(a)
        actual = torch.geqrf(noncontiguous(a.to(TPU)))
        assert_close(actual.a, expected.a, **TOL[torch.float32])
        assert_close(actual.tau, expected.tau, **TOL[torch.float32])
    a = make((2, 5, 3))
    out = (torch.empty(0, device=TPU), torch.empty(0, device=TPU))
    torch.geqrf(a.to(TPU), out=out)
    expected = torch.geqrf(a)
    assert_close(out[0], expected.a, **TOL[torch.float32])
    assert_close(out[1], expected.tau, **TOL[torch.float32])


def test_geqrf_empty_and_errors():
    for shape in [(0, 3), (3, 0), (2, 0, 0)]:
        expected = torch.geqrf(torch.empty(shape))
        actual = torch.geqrf(torch.empty(shape).to(TPU))
        assert_close(actual.a, expected.a)
        assert_close(actual.tau, expected.tau)
    assert_same_error(torch.geqrf, make((3,)))
    assert_same_error(torch.geqrf, make((3, 3), torch.bfloat16))
    assert_same_error(torch.geqrf, make((3, 3), torch.long))


# ---- linalg.qr ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (4, 4)])
def test_linalg_qr_modes_with_grad(dtype, shape):
    a = well_conditioned(shape, dtype)
    for mode in ("complete", "r"):
        expected = torch.linalg.qr(a, mode=mode)
        actual = torch.linalg.qr(a.to(TPU), mode=mode)
        assert_close(actual.Q, expected.Q, **TOL[dtype])
        assert_close(actual.R, expected.R, **TOL[dtype])
    check_grads(lambda x: torch.linalg.qr(x), [a], dtype)


def test_complete_qr_grad_of_wide_matrix():
    check_grads(lambda x: torch.linalg.qr(x, mode="complete"), [well_conditioned((3, 4))], torch.float32)


@pytest.mark.filterwarnings("ignore:torch.qr is deprecated")
def test_torch_qr_noncontiguous_and_out():
    a = well_conditioned((3, 5, 4))
    for some in (True, False):
        expected = torch.qr(a, some=some)
        actual = torch.qr(noncontiguous(a.to(TPU)), some=some)
        assert_close(actual.Q, expected.Q, **TOL[torch.float32])
        assert_close(actual.R, expected.R, **TOL[torch.float32])
    q, r = torch.empty(0, device=TPU), torch.empty(0, device=TPU)
    torch.linalg.qr(a.to(TPU), out=(q, r))
    expected = torch.linalg.qr(a)
    assert_close(q, expected.Q, **TOL[torch.float32])
    assert_close(r, expected.R, **TOL[torch.float32])


def test_linalg_qr_empty():
    for shape in [(0, 3), (3, 0), (2, 0, 0)]:
        for mode in ("reduced", "complete", "r"):
            expected = torch.linalg.qr(torch.empty(shape), mode=mode)
            actual = torch.linalg.qr(torch.empty(shape).to(TPU), mode=mode)
            assert_close(actual.Q, expected.Q)
            assert_close(actual.R, expected.R)


def test_linalg_qr_errors():
    a = make((3, 3))
    assert_same_error(torch.linalg.qr, a, mode="full")
    assert_same_error(torch.linalg.qr, make((3,)))
    assert_same_error(torch.linalg.qr, make((3, 3), torch.bfloat16))
    assert_same_error(torch.linalg.qr, make((3, 3), torch.long))
    # The backward formulas' errors: no Q in mode 'r', no gradient for a tall complete Q.
    for shape, mode in [((3, 3), "r"), ((4, 3), "complete")]:
        x = make(shape)

        def backward(t, mode=mode):
            torch.linalg.qr(t.requires_grad_(), mode=mode).R.sum().backward()

        assert_same_error(backward, x)


# ---- householder_product and ormqr ----


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_product_with_grad(dtype):
    a, tau = make((2, 5, 3), dtype, low=-1, high=1), make((2, 2), dtype, low=-1, high=1)
    check_grads(torch.linalg.householder_product, [a, tau], dtype)
    factors = torch.geqrf(make((4, 4), dtype))
    expected = torch.linalg.householder_product(*factors)
    actual = torch.linalg.householder_product(noncontiguous(factors.a.to(TPU)), factors.tau.to(TPU))
    assert_close(actual, expected, **TOL[dtype])


def test_householder_product_errors():
    assert_same_error(torch.linalg.householder_product, make((3, 2), torch.bfloat16), make((2,), torch.bfloat16))
    assert_same_error(torch.linalg.householder_product, make((2, 3)), make((2,)))
    assert_same_error(torch.linalg.householder_product, make((3, 2)), make((3,)))


@pytest.mark.parametrize("left, transpose", [(True, False), (True, True), (False, False), (False, True)])
def test_ormqr_with_grad(left, transpose):
    a, tau = make((2, 5, 3), low=-1, high=1), make((2, 3), low=-1, high=1)
    c = make((2, 5, 4) if left else (2, 4, 5), low=-1, high=1)
    check_grads(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose), [a, tau, c], torch.float32)


def test_ormqr_f64_noncontiguous_and_errors():
    factors = torch.geqrf(make((4, 4), torch.float64))
    c = make((4, 3), torch.float64)
    expected = torch.ormqr(factors.a, factors.tau, c, transpose=True)
    actual = torch.ormqr(factors.a.to(TPU), factors.tau.to(TPU), noncontiguous(c.to(TPU)), transpose=True)
    assert_close(actual, expected, **TOL[torch.float64])
    bf16 = [t.bfloat16() for t in (factors.a, factors.tau, c)]
    assert_same_error(torch.ormqr, *bf16)
    assert_same_error(torch.ormqr, make((5, 3)), make((3,)), make((4, 5)), left=True)


# ---- linalg.lstsq (driver='gels') ----


def check_lstsq(a, b, dtype):
    expected = torch.linalg.lstsq(a, b, driver="gels")
    actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver="gels")
    for name in ("solution", "residuals", "rank", "singular_values"):
        assert_close(getattr(actual, name), getattr(expected, name), **TOL[dtype])
    assert actual.solution.stride() == expected.solution.stride()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "a_shape, b_shape", [((6, 4), (6, 2)), ((2, 3, 5), (2, 3, 2)), ((2, 4, 4), (2, 4)), ((1, 5, 3), (3, 5, 2))]
)
def test_lstsq_gels(dtype, a_shape, b_shape):
    check_lstsq(well_conditioned(a_shape, dtype), make(b_shape, dtype), dtype)


@pytest.mark.parametrize("a_shape, b_shape", [((5, 3), (5, 2)), ((3, 5), (3,))])
def test_lstsq_gels_grad(a_shape, b_shape):
    a, b = well_conditioned(a_shape), make(b_shape, low=-1, high=1)
    check_grads(lambda x, y: torch.linalg.lstsq(x, y, driver="gels").solution, [a, b], torch.float32)


def test_lstsq_gels_noncontiguous_and_empty():
    a, b = well_conditioned((5, 3)), make((5, 2))
    expected = torch.linalg.lstsq(a, b, driver="gels")
    actual = torch.linalg.lstsq(noncontiguous(a.to(TPU)), noncontiguous(b.to(TPU)), driver="gels")
    assert_close(actual.solution, expected.solution, **TOL[torch.float32])
    assert_close(actual.residuals, expected.residuals, **TOL[torch.float32])
    for a_shape, b_shape in [((0, 3), (0, 2)), ((4, 0), (4, 2)), ((2, 4, 0), (2, 4, 2)), ((2, 5, 3), (2, 5, 0))]:
        expected = torch.linalg.lstsq(torch.empty(a_shape), make(b_shape), driver="gels")
        actual = torch.linalg.lstsq(torch.empty(a_shape).to(TPU), make(b_shape).to(TPU), driver="gels")
        assert_close(actual.solution, expected.solution)
        assert_close(actual.residuals, expected.residuals)


def test_lstsq_errors():
    a = make((3, 3))
    assert_same_error(torch.linalg.lstsq, make((3,)), make((3,)))
    assert_same_error(torch.linalg.lstsq, a, a.double())
    assert_same_error(torch.linalg.lstsq, a, make((2, 3, 3)))
    assert_same_error(torch.linalg.lstsq, a, make((4, 3)))
    assert_same_error(torch.linalg.lstsq, a, make((4,)))
    assert_same_error(torch.linalg.lstsq, a, a, driver="qr")
    assert_same_error(torch.linalg.lstsq, a.bfloat16(), a.bfloat16(), driver="gels")
    # The rank-revealing drivers (the CPU's default gelsy among them) are not lowered: a clear
    # error rather than gels' answer, which differs for rank-deficient matrices.
    for driver in (None, "gelsy", "gelsd", "gelss"):
        with pytest.raises(NotImplementedError, match="driver='gels' solves full-rank systems"):
            torch.linalg.lstsq(a.to(TPU), a.to(TPU), driver=driver)
