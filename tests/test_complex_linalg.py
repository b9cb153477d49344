"""complex64 matrix decompositions and solves on tpu against the CPU: Cholesky (A = L L^H),
triangular solves (plain and conjugate transposes), cholesky_solve/inverse, LU with LAPACK's
|re| + |im| pivoting, lu_solve (adjoint), solve, inv, det, slogdet and logdet, Householder QR
(geqrf with zgeqrf's complex reflectors, householder_product, ormqr with Q^H, linalg.qr), with
batches, non-contiguous inputs, gradients and the CPU's errors."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous
from linalg_helpers import cpu_error, tpu_leaf

C64 = torch.complex64
# The factorizations accumulate rounding over n steps: a few times complex64's elementwise tolerance.
TOL = dict(rtol=1e-4, atol=1e-4)


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def general(shape):
    """Well-conditioned complex matrices: random entries and a weighted diagonal."""
    n = shape[-1]
    return make(shape, C64, low=-1, high=1) + 2 * torch.eye(n, dtype=C64)


def hermitian_pd(shape):
    """Well-conditioned Hermitian positive definite matrices."""
    a = make(shape, C64, low=-1, high=1)
    n = shape[-1]
    return a @ a.mH / n + torch.eye(n, dtype=C64)


def triangular(shape, upper):
    a = general(shape)
    return a.triu() if upper else a.tril()


def check(fn, *inputs, **tol):
    """fn on the tpu copies of inputs against the CPU, for each output."""
    expected = fn(*inputs)
    actual = fn(*[t.to(TPU) for t in inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, **(dict(TOL, **tol) if e.is_floating_point() or e.is_complex() else {}))


def check_grads(fn, *inputs):
    """Forward and backward of fn (complex inputs, a complex output) against the CPU."""
    cpu_inputs = [t.detach().clone().requires_grad_() for t in inputs]
    tpu_inputs = [tpu_leaf(t) for t in inputs]
    expected, actual = fn(*cpu_inputs), fn(*tpu_inputs)
    assert_close(actual, expected, **TOL)
    grad = make(expected.shape, expected.dtype, low=-1, high=1)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    for t, c in zip(tpu_inputs, cpu_inputs, strict=True):
        assert_close(t.grad, c.grad, **TOL)


# ---- Cholesky ----


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_batched_and_noncontiguous(upper):
    a = hermitian_pd((2, 3, 5, 5))
    check(lambda x: torch.linalg.cholesky_ex(x, upper=upper), a)
    expected = torch.linalg.cholesky(a, upper=upper)
    assert_close(torch.linalg.cholesky(noncontiguous(a.to(TPU)), upper=upper), expected, **TOL)


def test_cholesky_reads_one_triangle():
    a = hermitian_pd((4, 4))
    garbage = make((4, 4), C64)
    assert_close(torch.linalg.cholesky((a.tril() + garbage.triu(1)).to(TPU)), torch.linalg.cholesky(a), **TOL)
    upper = a.triu() + garbage.tril(-1)
    assert_close(torch.linalg.cholesky(upper.to(TPU), upper=True), torch.linalg.cholesky(upper, upper=True), **TOL)


def test_cholesky_with_grad():
    check_grads(torch.linalg.cholesky, hermitian_pd((2, 4, 4)))


def test_cholesky_info_and_error_for_non_positive_definite():
    good = hermitian_pd((4, 4))
    indefinite = good.clone()
    indefinite[2, 2] = -5
    batch = torch.stack([good, indefinite])
    expected = torch.linalg.cholesky_ex(batch).info
    assert expected.tolist() == [0, 3]
    assert_close(torch.linalg.cholesky_ex(batch.to(TPU)).info, expected)
    kind, message = cpu_error(torch.linalg.cholesky, batch)
    with pytest.raises(kind, match=re.escape(message)):
        torch.linalg.cholesky(batch.to(TPU))


# ---- triangular solves ----


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular_broadcast(upper, left, unitriangular):
    a = triangular((2, 1, 4, 4), upper)
    b = make((3, 4, 2) if left else (3, 2, 4), C64)
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unitriangular), a, b)


def test_solve_triangular_noncontiguous_with_grad():
    a = triangular((4, 4), False)
    b = make((4, 3), C64)
    expected = torch.linalg.solve_triangular(a, b, upper=False)
    actual = torch.linalg.solve_triangular(noncontiguous(a.to(TPU)), noncontiguous(b.to(TPU)), upper=False)
    assert_close(actual, expected, **TOL)
    check_grads(lambda x, y: torch.linalg.solve_triangular(x.tril(), y, upper=False), a, b)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
def test_triangular_solve_transpose_is_not_conjugated(upper, transpose):
    a = triangular((2, 4, 4), upper)
    b = make((2, 4, 3), C64)
    check(lambda y, x: torch.triangular_solve(y, x, upper=upper, transpose=transpose), b, a)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(upper):
    factor = torch.linalg.cholesky(hermitian_pd((2, 4, 4)), upper=upper)
    b = make((2, 4, 3), C64)
    check(lambda y, f: torch.cholesky_solve(y, f, upper=upper), b, factor)
    check(lambda f: torch.cholesky_inverse(f, upper=upper), factor)


# ---- LU and what builds on it ----


def test_lu_factor_pivots_on_re_plus_im_like_getrf():
    # Column 0: |2.9| > |2+2i| = 2.83, but |re| + |im| (what icamax compares) is larger for 2+2i.
    a = torch.tensor(
        [[0.5, 1, 2], [2.9, 0.5j, 1], [2 + 2j, 1, 0.25]],
        dtype=C64,
    )
    lu, pivots, info = torch.linalg.lu_factor_ex(a)
    assert pivots[0].item() == 3  # the CPU's choice: |re| + |im|, not |z|
    check(torch.linalg.lu_factor_ex, a)
    # Exact pivots over a batch, non-contiguous.
    batch = make((3, 6, 6), C64)
    expected = torch.linalg.lu_factor(batch)
    actual = torch.linalg.lu_factor(noncontiguous(batch.to(TPU)))
    assert torch.equal(actual.pivots.cpu(), expected.pivots)
    assert_close(actual.LU, expected.LU, **TOL)


@pytest.mark.parametrize("shape", [(2, 5, 5), (4, 6), (6, 4)])
def test_lu_and_unpack(shape):
    a = make(shape, C64)
    check(torch.linalg.lu, a)
    lu, pivots = torch.linalg.lu_factor(a)
    check(torch.lu_unpack, lu, pivots)


def test_lu_factor_singular_info():
    singular = torch.tensor([[1, 1j, 2], [2, 2j, 4], [1j, 1, 0]], dtype=C64)
    batch = torch.stack([general((3, 3)), singular])
    assert_close(torch.linalg.lu_factor_ex(batch.to(TPU)).info, torch.linalg.lu_factor_ex(batch).info)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_broadcast(left, adjoint):
    lu, pivots = torch.linalg.lu_factor(general((2, 1, 4, 4)))
    b = make((2, 3, 4, 2) if left else (2, 3, 2, 4), C64)
    check(lambda f, p, y: torch.linalg.lu_solve(f, p, y, left=left, adjoint=adjoint), lu, pivots, b)


def test_solve_left_right_vector_and_noncontiguous():
    a = general((2, 4, 4))
    check(torch.linalg.solve, a, make((2, 4, 3), C64))
    check(lambda x, y: torch.linalg.solve(x, y, left=False), a, make((2, 3, 4), C64))
    check(torch.linalg.solve_ex, a, make((2, 4), C64))
    expected = torch.linalg.solve(a, a.mH)
    actual = torch.linalg.solve(noncontiguous(a.to(TPU)), noncontiguous(a.to(TPU).mH.contiguous()))
    assert_close(actual, expected, **TOL)


def test_solve_with_grad():
    check_grads(torch.linalg.solve, general((2, 4, 4)), make((2, 4, 2), C64))


def test_inv():
    a = general((3, 5, 5))
    check(torch.linalg.inv_ex, a)
    assert_close(torch.linalg.inv(noncontiguous(a.to(TPU))), torch.linalg.inv(a), **TOL)


def test_det_slogdet_logdet():
    a = general((3, 5, 5))
    for matrix in (a, a.mT.contiguous().mT):  # contiguous and not: the CPU factors complex A as is
        check(torch.linalg.det, matrix)
        check(torch.linalg.slogdet, matrix)
        check(torch.logdet, matrix)
    sign, logabsdet = torch.linalg.slogdet(a.to(TPU))
    assert logabsdet.dtype == torch.float32
    assert_close(sign.abs(), torch.ones(3), **TOL)


def test_det_and_slogdet_of_singular_matrix():
    singular = torch.tensor([[1, 1j, 2], [2, 2j, 4], [1j, 1, 0]], dtype=C64)
    assert_close(torch.linalg.det(singular.to(TPU)), torch.linalg.det(singular), **TOL)
    sign, logabsdet = torch.linalg.slogdet(singular.to(TPU))
    expected_sign, expected_logabsdet = torch.linalg.slogdet(singular)
    assert_close(sign, expected_sign)
    assert_close(logabsdet, expected_logabsdet)


def test_det_with_grad():
    check_grads(torch.linalg.det, general((2, 4, 4)))


def test_solve_and_inv_singular_raise_the_cpu_error():
    singular = torch.tensor([[1, 1j, 2], [2, 2j, 4], [1j, 1, 0]], dtype=C64)
    b = make((3, 2), C64)
    for fn, args in [(torch.linalg.solve, (singular, b)), (torch.linalg.inv, (singular,))]:
        kind, message = cpu_error(fn, *args)
        with pytest.raises(kind, match=re.escape(message)):
            fn(*[t.to(TPU) for t in args])


# ---- Householder QR ----


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_geqrf_complex_reflectors_like_zgeqrf(shape):
    # R's diagonal real (beta), tau complex: the CPU's compact form entry for entry.
    check(torch.geqrf, make(shape, C64))


def test_geqrf_trivial_reflectors_and_noncontiguous():
    # Columns zero below the diagonal: with a real diagonal entry H = I (tau = 0); with a complex
    # one a reflector still makes R's diagonal real. A zero column too.
    real_diagonal = torch.triu(make((4, 4), C64)) - 1j * torch.diag(make((4,), C64).imag)
    zero_column = make((4, 3), C64)
    zero_column[:, 1] = 0
    for a in (real_diagonal, torch.triu(make((4, 4), C64)), zero_column):
        expected = torch.geqrf(a)
        actual = torch.geqrf(noncontiguous(a.to(TPU)))
        assert_close(actual.a, expected.a, **TOL)
        assert_close(actual.tau, expected.tau, **TOL)


@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (4, 4)])
def test_linalg_qr_modes_with_grad(shape):
    a = general(shape) if shape[-1] == shape[-2] else make(shape, C64)
    for mode in ("reduced", "complete", "r"):
        check(lambda x, mode=mode: torch.linalg.qr(x, mode=mode), a)
    check_grads(lambda x: torch.linalg.qr(x).Q, a)
    check_grads(lambda x: torch.linalg.qr(x).R, a)


def test_householder_product_with_grad():
    factors = torch.geqrf(make((2, 5, 3), C64))
    check(torch.linalg.householder_product, *factors)
    check_grads(torch.linalg.householder_product, make((2, 5, 3), C64, low=-1, high=1), make((2, 2), C64, -1, 1))


@pytest.mark.parametrize("left, transpose", [(True, False), (True, True), (False, False), (False, True)])
def test_ormqr_applies_q_or_its_adjoint(left, transpose):
    factors = torch.geqrf(make((2, 5, 3), C64))
    c = make((2, 5, 4) if left else (2, 4, 5), C64)
    check(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose), *factors, c)
    a, tau = make((5, 3), C64, low=-1, high=1), make((3,), C64, low=-1, high=1)
    c = make((5, 2) if left else (2, 5), C64, low=-1, high=1)
    check_grads(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose), a, tau, c)


# ---- eigh and svd ----
# Eigenvectors and singular vectors are unique only up to a phase per column, and LAPACK
# normalizes none: compared as the OpInfo samples compare them (their magnitudes, and phase-free
# products), with the decomposition itself checked.


def hermitian(shape):
    a = make(shape, C64)
    return a + a.mH


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (1, 1)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_hermitian(shape, uplo):
    a = hermitian(shape)
    # The triangle not read holds garbage, the diagonal an imaginary part LAPACK ignores.
    garbled = a + (make(shape, C64).triu(1) if uplo == "L" else make(shape, C64).tril(-1))
    garbled = garbled + 1j * torch.diag_embed(make(shape[:-1], torch.float32))
    expected_values, expected_vectors = torch.linalg.eigh(garbled, UPLO=uplo)
    values, vectors = torch.linalg.eigh(noncontiguous(garbled.to(TPU)), UPLO=uplo)
    assert_close(values, expected_values, **TOL)
    assert_close(vectors.abs(), expected_vectors.abs(), **TOL)
    vectors, values = vectors.cpu(), values.cpu()
    torch.testing.assert_close(a @ vectors, vectors * values.unsqueeze(-2).to(C64), **TOL)
    check(torch.linalg.eigvalsh, a)


def test_eigh_with_grad():
    # A phase-invariant function of the eigenvectors, as the OpInfo gradient checks use.
    a = hermitian((3, 4, 4))
    cpu, tpu = a.clone().requires_grad_(), tpu_leaf(a)
    expected, actual = [torch.linalg.eigh(x) for x in (cpu, tpu)]
    grads = make((3, 4), torch.float32), make((3, 4, 4), torch.float32)
    torch.autograd.backward([expected[0], expected[1].abs()], list(grads))
    torch.autograd.backward([actual[0], actual[1].abs()], [g.to(TPU) for g in grads])
    assert_close(tpu.grad, cpu.grad, **TOL)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd(shape, full_matrices):
    a = make(shape, C64)
    expected = torch.linalg.svd(a, full_matrices=full_matrices)
    actual = torch.linalg.svd(noncontiguous(a.to(TPU)), full_matrices=full_matrices)
    k = expected.S.shape[-1]
    assert_close(actual.S, expected.S, **TOL)
    assert_close(actual.U[..., :k].abs(), expected.U[..., :k].abs(), **TOL)
    assert_close(actual.Vh[..., :k, :].abs(), expected.Vh[..., :k, :].abs(), **TOL)
    assert_close(actual.U[..., :k] @ actual.Vh[..., :k, :], expected.U[..., :k] @ expected.Vh[..., :k, :], **TOL)
    for q in (actual.U, actual.Vh.mH):  # orthonormal columns, the completed ones too
        gram = q.mH @ q
        assert_close(gram, torch.eye(q.shape[-1], dtype=C64).expand(gram.shape), **TOL)
    check(torch.linalg.svdvals, a)


def test_svd_rank_deficient_and_grad():
    a = make((4, 2), C64) @ make((2, 5), C64)  # rank 2: U completed beyond it
    u, s, vh = torch.linalg.svd(a.to(TPU))
    assert_close(s, torch.linalg.svdvals(a), **TOL)
    assert_close((u[:, :4] * s.to(C64)) @ vh[:4], a, **TOL)
    assert_close(u.mH @ u, torch.eye(4, dtype=C64), **TOL)
    check_grads(lambda x: torch.linalg.svdvals(x).to(C64), make((2, 4, 3), C64))
    check_grads(lambda x: (lambda usv: usv[0] @ usv[2])(torch.linalg.svd(x, full_matrices=False)), make((4, 3), C64))
