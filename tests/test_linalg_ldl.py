"""LDL^T factorization and solve (linalg.ldl_factor, ldl_factor_ex, ldl_solve) and the deprecated
torch.cholesky on tpu against the CPU. The factorization reproduces LAPACK's sytf2 pivot choices
(zsytf2, or zhetf2 for complex with hermitian=True), so pivots and info must equal the CPU's
exactly and LD match to rounding."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous
from linalg_helpers import assert_same_error, cpu_error, tpu_leaf

pytestmark = pytest.mark.usefixtures("no_cpu_fallback")

DTYPES = [torch.float32, torch.float64]
TOL = {
    torch.float32: dict(rtol=1e-4, atol=1e-5),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
    torch.complex64: dict(rtol=1e-4, atol=1e-5),
}
HERMITIAN = [False, True]


def symmetric(shape, dtype, sparsity=0.0):
    """Random symmetric (indefinite) matrices; with sparsity, that share of entries zero."""
    a = make(shape, torch.float64, low=-1, high=1)
    if sparsity:
        a = a * (torch.rand(shape) >= sparsity)
    return (torch.tril(a) + torch.tril(a, -1).mT).to(dtype)


def weak_diagonal(shape, dtype):
    """Symmetric matrices with a small diagonal: Bunch-Kaufman must take 2x2 pivots."""
    a = symmetric(shape, torch.float64)
    return (a - torch.diag_embed(0.95 * torch.diagonal(a, dim1=-2, dim2=-1))).to(dtype)


def complex_symmetric(shape, hermitian, weak=False):
    """Random complex64 matrices, complex symmetric (A = A^T) or Hermitian (A = A^H) below the
    diagonal, indefinite. The diagonal keeps an imaginary part, which zhetrf ignores. With weak,
    the diagonal is small, so Bunch-Kaufman must take 2x2 pivots."""
    a = make(shape, torch.complex128, low=-1, high=1)
    lower = torch.tril(a, -1)
    a = torch.tril(a) + (lower.mH if hermitian else lower.mT)
    if weak:
        a = a - torch.diag_embed(0.95 * torch.diagonal(a, dim1=-2, dim2=-1))
    return a.to(torch.complex64)


def spd(shape, dtype):
    a = make(shape, torch.float64, low=-1, high=1)
    n = shape[-1]
    return (a @ a.mT / n + torch.eye(n, dtype=torch.float64)).to(dtype)


def legacy_cholesky(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch.cholesky's deprecation warning
        return torch.cholesky(*args, **kwargs)


def assert_same_factorization(a, **kwargs):
    expected = torch.linalg.ldl_factor_ex(a, **kwargs)
    actual = torch.linalg.ldl_factor_ex(a.to(TPU), **kwargs)
    assert_close(actual.pivots, expected.pivots)
    assert_close(actual.info, expected.info)
    assert_close(actual.LD, expected.LD, **TOL[a.dtype])
    return expected


# ---- ldl_factor ----


@pytest.mark.parametrize("dtype", DTYPES)
def test_ldl_factor_pivots_and_factor_match_cpu(dtype):
    a = torch.cat([symmetric((4, 3, 7, 7), dtype), weak_diagonal((1, 3, 7, 7), dtype)])
    expected = assert_same_factorization(a)
    # Random indefinite matrices take 2x2 pivots and interchanges: both paths are exercised.
    assert (expected.pivots < 0).any()
    positions = torch.arange(1, 8, dtype=torch.int32)
    assert ((expected.pivots > 0) & (expected.pivots != positions)).any()
    ld, pivots = torch.linalg.ldl_factor(a.to(TPU), hermitian=True)
    assert_close(pivots, expected.pivots)
    assert_close(ld, expected.LD, **TOL[dtype])


def test_ldl_factor_singular_columns_set_info():
    # Zero rows and columns stay exactly zero through the elimination: each sets info (at its
    # first occurrence) and is skipped, next to 1x1 and 2x2 pivots on the rest.
    a = torch.cat([symmetric((3, 6, 6), torch.float64), weak_diagonal((3, 6, 6), torch.float64)])
    for i, zero in enumerate([[0], [5], [2, 3], [1], [4], [0, 5]]):
        a[i, zero, :] = 0
        a[i, :, zero] = 0
    a[0] = 0
    expected = assert_same_factorization(a)
    assert (expected.info != 0).all() and (expected.pivots < 0).any()


def test_ldl_factor_noncontiguous_out_and_sizes():
    a = symmetric((5, 5), torch.float32)
    expected = torch.linalg.ldl_factor(a)
    actual = torch.linalg.ldl_factor(noncontiguous(a.to(TPU)))
    assert_close(actual.pivots, expected.pivots)
    assert_close(actual.LD, expected.LD, **TOL[torch.float32])
    ld = torch.empty(0, device=TPU)
    pivots = torch.empty(0, dtype=torch.int32, device=TPU)
    torch.linalg.ldl_factor(a.to(TPU), out=(ld, pivots))
    assert_close(ld, expected.LD, **TOL[torch.float32])
    assert_close(pivots, expected.pivots)
    for shape in [(1, 1), (2, 2), (2, 0, 0)]:
        assert_same_factorization(symmetric(shape, torch.float64))


@pytest.mark.parametrize("hermitian", HERMITIAN)
def test_ldl_factor_complex_pivots_and_factor_match_cpu(hermitian):
    # Hermitian ones take a 1x1 interchange less often than real ones: 8 random matrices make a
    # batch without one unlikely (about 1 in 1600 had none with 4).
    a = torch.cat([complex_symmetric((8, 3, 7, 7), hermitian), complex_symmetric((1, 3, 7, 7), hermitian, weak=True)])
    expected = assert_same_factorization(a, hermitian=hermitian)
    assert (expected.pivots < 0).any()
    positions = torch.arange(1, 8, dtype=torch.int32)
    assert ((expected.pivots > 0) & (expected.pivots != positions)).any()
    ld, pivots = torch.linalg.ldl_factor(noncontiguous(a.to(TPU)), hermitian=hermitian)
    assert_close(pivots, expected.pivots)
    assert_close(ld, expected.LD, **TOL[torch.complex64])
    if hermitian:
        # D's diagonal is real: the input's imaginary parts there are dropped, not rounded.
        assert torch.diagonal(a, dim1=-2, dim2=-1).imag.ne(0).any()
        assert torch.diagonal(ld.cpu(), dim1=-2, dim2=-1).imag.eq(0).all()


@pytest.mark.parametrize("hermitian", HERMITIAN)
def test_ldl_factor_complex_reads_lower_triangle_only(hermitian):
    a = complex_symmetric((2, 6, 6), hermitian, weak=True)
    a = a + torch.triu(make((2, 6, 6), torch.complex64), 1)
    assert_same_factorization(a, hermitian=hermitian)


@pytest.mark.parametrize("hermitian", HERMITIAN)
def test_ldl_factor_complex_ranks_pivots_by_cabs1(hermitian):
    # Column 0's candidates: |1+1j| < 1.6 < CABS1(1+1j) = 2. LAPACK's izamax and comparisons use
    # CABS1, which picks row 1 and a 2x2 pivot; the modulus would pick row 2 as a 1x1 pivot.
    lower = torch.tensor([[0.1, 0, 0], [1 + 1j, 0.1, 0], [1.6, 0.2, 2.0]], dtype=torch.complex64)
    strict = torch.tril(lower, -1)
    a = lower + (strict.mH if hermitian else strict.mT)
    expected = assert_same_factorization(a, hermitian=hermitian)
    assert expected.pivots[0] == -2


@pytest.mark.parametrize("hermitian", HERMITIAN)
def test_ldl_factor_complex_singular_columns_set_info(hermitian):
    a = torch.cat([complex_symmetric((3, 6, 6), hermitian), complex_symmetric((3, 6, 6), hermitian, weak=True)])
    for i, zero in enumerate([[0], [5], [2, 3], [1], [4], [0, 5]]):
        a[i, zero, :] = 0
        a[i, :, zero] = 0
    a[0] = 0
    expected = assert_same_factorization(a, hermitian=hermitian)
    assert (expected.info != 0).all() and (expected.pivots < 0).any()


def test_ldl_factor_errors():
    singular = torch.diag(torch.tensor([1.0, 0.0, 2.0]))
    assert_same_error(torch.linalg.ldl_factor, singular)
    assert_same_error(torch.linalg.ldl_factor, make((2, 3)))
    assert_same_error(torch.linalg.ldl_factor, make((3, 3), torch.int64))
    assert_same_error(torch.linalg.ldl_factor, singular.to(torch.complex64), hermitian=True)
    kind, message = cpu_error(torch.linalg.ldl_factor_ex, make((3, 3), torch.float16))
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.ldl_factor_ex(make((3, 3), torch.float16).to(TPU))


# ---- ldl_solve ----


@pytest.mark.parametrize("dtype", DTYPES)
def test_ldl_solve_broadcasts_batches(dtype):
    a = torch.stack([symmetric((1, 6, 6), dtype), weak_diagonal((1, 6, 6), dtype)])
    ld, pivots = torch.linalg.ldl_factor(a)
    assert (pivots < 0).any()
    b = make((3, 6, 4), dtype, low=-1, high=1)
    # The CPU kernel crashes on batch dims it must broadcast (torch 2.13): expand them for it.
    expected = torch.linalg.ldl_solve(ld.expand(2, 3, 6, 6), pivots.expand(2, 3, 6), b.expand(2, 3, 6, 4))
    actual = torch.linalg.ldl_solve(ld.to(TPU), pivots.to(TPU), noncontiguous(b.to(TPU)))
    assert_close(actual, expected, rtol=1e-3 if dtype == torch.float32 else 1e-8, atol=1e-4)


def test_ldl_solve_from_tpu_factorization_solves_system():
    a = torch.cat([symmetric((2, 8, 8), torch.float64), weak_diagonal((2, 8, 8), torch.float64)])
    b = make((4, 8, 2), torch.float64, low=-1, high=1)
    ld, pivots = torch.linalg.ldl_factor(a.to(TPU))
    x = torch.linalg.ldl_solve(ld, pivots, b.to(TPU))
    assert_close(x, torch.linalg.solve(a, b), rtol=1e-7, atol=1e-7)
    out = torch.empty(0, dtype=torch.float64, device=TPU)
    torch.linalg.ldl_solve(ld, pivots, b.to(TPU), out=out)
    assert_close(out, x.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("hermitian", HERMITIAN)
def test_ldl_solve_complex_broadcasts_batches(hermitian):
    a = torch.stack([complex_symmetric((1, 6, 6), hermitian), complex_symmetric((1, 6, 6), hermitian, weak=True)])
    ld, pivots = torch.linalg.ldl_factor(a, hermitian=hermitian)
    assert (pivots < 0).any()
    b = make((3, 6, 4), torch.complex64, low=-1, high=1)
    expected = torch.linalg.ldl_solve(
        ld.expand(2, 3, 6, 6), pivots.expand(2, 3, 6), b.expand(2, 3, 6, 4), hermitian=hermitian
    )
    actual = torch.linalg.ldl_solve(ld.to(TPU), pivots.to(TPU), noncontiguous(b.to(TPU)), hermitian=hermitian)
    assert_close(actual, expected, rtol=1e-3, atol=1e-4)


def test_ldl_solve_complex_hermitian_reads_diagonal_as_zhetrs():
    # A complex symmetric factorization has complex diagonal entries: zhetrs takes the real part
    # of a 1x1 block but the whole entries of a 2x2 block, and conj(A(k+1, k)) for its first row.
    a = torch.cat([complex_symmetric((2, 6, 6), False), complex_symmetric((2, 6, 6), False, weak=True)])
    ld, pivots = torch.linalg.ldl_factor(a)
    assert (pivots < 0).any() and (pivots > 0).any()
    b = make((4, 6, 2), torch.complex64, low=-1, high=1)
    expected = torch.linalg.ldl_solve(ld, pivots, b, hermitian=True)
    actual = torch.linalg.ldl_solve(noncontiguous(ld.to(TPU)), pivots.to(TPU), b.to(TPU), hermitian=True)
    assert_close(actual, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("hermitian", HERMITIAN)
def test_ldl_solve_complex_from_tpu_factorization_solves_system(hermitian):
    a = torch.cat([complex_symmetric((2, 8, 8), hermitian), complex_symmetric((2, 8, 8), hermitian, weak=True)])
    if hermitian:
        a = a - 1j * torch.diag_embed(torch.diagonal(a, dim1=-2, dim2=-1).imag)  # the matrix zhetrf factors
    b = make((4, 8, 2), torch.complex64, low=-1, high=1)
    ld, pivots = torch.linalg.ldl_factor(a.to(TPU), hermitian=hermitian)
    x = torch.linalg.ldl_solve(ld, pivots, b.to(TPU), hermitian=hermitian).cpu().to(torch.complex128)
    # In complex64 the error in x grows with the condition number (random matrices are at times
    # nearly singular), the backward error does not: Bunch-Kaufman's is a small multiple of the
    # unit roundoff (6e-8).
    a, b = a.to(torch.complex128), b.to(torch.complex128)
    residual = torch.linalg.matrix_norm(a @ x - b, ord=torch.inf)
    scale = torch.linalg.matrix_norm(a, ord=torch.inf) * torch.linalg.matrix_norm(x, ord=torch.inf)
    assert (residual / (scale + torch.linalg.matrix_norm(b, ord=torch.inf)) < 1e-5).all()


def test_ldl_solve_errors_and_empty():
    ld, pivots = torch.linalg.ldl_factor(symmetric((3, 3), torch.float32))
    assert_same_error(torch.linalg.ldl_solve, ld, pivots, make((4, 2)))
    assert_same_error(torch.linalg.ldl_solve, ld, pivots, make((3,)))
    half = ld.to(torch.float16)
    assert_same_error(torch.linalg.ldl_solve, half, pivots, make((3, 2), torch.float16))
    empty = torch.linalg.ldl_solve(
        torch.empty(0, 0, device=TPU), torch.empty(0, dtype=torch.int32, device=TPU), torch.empty(0, 2, device=TPU)
    )
    assert_close(empty, torch.empty(0, 2))


# ---- torch.cholesky (deprecated) ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_legacy_cholesky_batched_with_grad(dtype, upper):
    a = spd((2, 3, 5, 5), dtype)
    cpu_input, tpu_input = a.clone().requires_grad_(), tpu_leaf(a)
    expected = legacy_cholesky(cpu_input, upper=upper)
    actual = legacy_cholesky(tpu_input, upper=upper)
    assert_close(actual, expected.detach(), **TOL[dtype])
    grad = make(expected.shape, dtype, low=-1, high=1)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(tpu_input.grad, cpu_input.grad, **TOL[dtype])


def test_legacy_cholesky_reads_one_triangle_noncontiguous_and_out():
    a = spd((4, 4), torch.float32)
    lower = torch.tril(a) + torch.triu(make((4, 4)), 1)
    assert_close(legacy_cholesky(noncontiguous(lower.to(TPU))), legacy_cholesky(lower), **TOL[torch.float32])
    upper = torch.triu(a) + torch.tril(make((4, 4)), -1)
    assert_close(legacy_cholesky(upper.to(TPU), upper=True), legacy_cholesky(upper, upper=True), **TOL[torch.float32])
    out = torch.empty(0, dtype=torch.float64, device=TPU)
    legacy_cholesky(a.to(TPU), out=out)
    assert_close(out, legacy_cholesky(a).double(), **TOL[torch.float32])
    kind, message = cpu_error(legacy_cholesky, a, out=torch.empty(0, dtype=torch.int32))
    with pytest.raises(kind, match=re.escape(message)):
        legacy_cholesky(a.to(TPU), out=torch.empty(0, dtype=torch.int32, device=TPU))


def test_legacy_cholesky_errors_and_empty():
    good = spd((3, 3), torch.float64)
    indefinite = torch.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    assert_same_error(legacy_cholesky, indefinite)
    assert_same_error(legacy_cholesky, torch.stack([good, indefinite]))
    assert_same_error(legacy_cholesky, make((2, 3)))
    assert_same_error(legacy_cholesky, make((3,)))
    assert_same_error(legacy_cholesky, make((3, 3), torch.int64))
    assert_close(legacy_cholesky(torch.empty(0, 3, device=TPU)), legacy_cholesky(torch.empty(0, 3)))
