"""Spectral decompositions on tpu against the CPU: eigh/eigvalsh and svd/svdvals (Jacobi loops in
the program), what PyTorch composes from them (pinv, nuclear and spectral norms, cond,
matrix_rank), and matrix_exp, with gradients and the CPU's errors.

Eigenvectors and singular vectors are unique only up to sign (and within repeated values up to a
rotation), so vectors are compared through sign-invariant quantities or after aligning signs."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous
from linalg_helpers import assert_same_error, cpu_error, tpu_leaf

DTYPES = [torch.float32, torch.float64]
# Iterative decompositions accumulate rounding over sweeps: a few times the elementwise tolerances.
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-10)}


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def symmetric(shape, dtype):
    a = make(shape, torch.float64, low=-1, high=1)
    return (a + a.mT).to(dtype)


def with_eigenvalues(values, dtype, batch=()):
    """Q diag(values) Q^T for a random orthogonal Q, in float64 then cast."""
    n = len(values)
    q, _ = torch.linalg.qr(make(batch + (n, n), torch.float64, low=-1, high=1))
    return (q @ torch.diag(torch.tensor(values, dtype=torch.float64)) @ q.mT).to(dtype)


def align_signs(actual, expected):
    """actual's columns with signs flipped to match expected's (both CPU tensors)."""
    signs = torch.sign((actual * expected).sum(-2, keepdim=True))
    return actual * torch.where(signs == 0, torch.ones_like(signs), signs)


def assert_orthonormal_columns(q, **tol):
    q = q.cpu()
    eye = torch.eye(q.shape[-1], dtype=q.dtype).expand(q.shape[:-2] + (q.shape[-1], q.shape[-1]))
    torch.testing.assert_close(q.mT @ q, eye, **tol)


def check_grads(fn, inputs, dtype, **tol):
    """fn's (gauge-invariant) outputs and their input gradients against the CPU."""
    cpu_inputs = [t.detach().clone().requires_grad_() for t in inputs]
    tpu_inputs = [tpu_leaf(t) for t in inputs]
    expected, actual = fn(*cpu_inputs), fn(*tpu_inputs)
    tolerance = dict(TOL[dtype], **tol)
    assert_close(actual, expected, **tolerance)
    grad = make(expected.shape, expected.dtype, low=-1, high=1)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    for c, t in zip(cpu_inputs, tpu_inputs, strict=True):
        assert_close(t.grad, c.grad, **tolerance)


# ---- eigh ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_batched_reads_one_triangle(dtype, uplo):
    # The other triangle holds garbage that must be ignored, as LAPACK ignores it.
    a = make((2, 3, 6, 6), dtype)
    values, vectors = torch.linalg.eigh(a.to(TPU), UPLO=uplo)
    expected_values, expected_vectors = torch.linalg.eigh(a, UPLO=uplo)
    assert_close(values, expected_values, **TOL[dtype])
    assert_orthonormal_columns(vectors, **TOL[dtype])
    assert vectors.shape == expected_vectors.shape and vectors.dtype == dtype
    aligned = align_signs(vectors.cpu(), expected_vectors)
    torch.testing.assert_close(aligned, expected_vectors, **TOL[dtype])
    triangle = a.tril() if uplo == "L" else a.triu()
    full = triangle + triangle.mT - torch.diag_embed(triangle.diagonal(dim1=-2, dim2=-1))
    torch.testing.assert_close(vectors.cpu() @ torch.diag_embed(values.cpu()) @ vectors.cpu().mT, full, **TOL[dtype])
    assert_close(torch.linalg.eigvalsh(a.to(TPU), UPLO=uplo), expected_values, **TOL[dtype])


@pytest.mark.parametrize("n", [1, 5])
def test_eigh_noncontiguous_and_small(n):
    a = symmetric((3, n, n), torch.float64)
    values, vectors = torch.linalg.eigh(noncontiguous(a.to(TPU)))
    expected_values, expected_vectors = torch.linalg.eigh(a)
    assert_close(values, expected_values, **TOL[torch.float64])
    torch.testing.assert_close(vectors.cpu().abs(), expected_vectors.abs(), **TOL[torch.float64])
    out = (torch.empty(0, dtype=a.dtype, device=TPU), torch.empty(0, dtype=a.dtype, device=TPU))
    torch.linalg.eigh(a.to(TPU), out=out)
    assert_close(out[0], expected_values, **TOL[torch.float64])
    torch.testing.assert_close(out[1].cpu().abs(), expected_vectors.abs(), **TOL[torch.float64])


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_repeated_and_clustered_eigenvalues(dtype):
    # Repeated eigenvalues leave the eigenvectors free within their eigenspace: compare the
    # values, the reconstruction and the orthogonality.
    a = with_eigenvalues([-2.0, 1.0, 1.0, 1.0, 1.0 + 1e-6, 3.0], dtype, batch=(2,))
    values, vectors = torch.linalg.eigh(a.to(TPU))
    assert_close(values, torch.linalg.eigvalsh(a), **TOL[dtype])
    assert_orthonormal_columns(vectors, **TOL[dtype])
    rebuilt = vectors.cpu() @ torch.diag_embed(values.cpu()) @ vectors.cpu().mT
    torch.testing.assert_close(rebuilt, a, **TOL[dtype])


def test_eigvalsh_ill_conditioned_float64():
    # Jacobi keeps small eigenvalues accurate relative to the largest one.
    values = [1e-9, 1e-6, 1e-3, 0.5, 1.0]
    a = with_eigenvalues(values, torch.float64)
    assert_close(torch.linalg.eigvalsh(a.to(TPU)), torch.linalg.eigvalsh(a), rtol=1e-7, atol=1e-14)


def test_eigh_zero_size_and_zero_matrix():
    for shape in [(0, 0), (2, 0, 0)]:
        values, vectors = torch.linalg.eigh(torch.zeros(shape).to(TPU))
        assert values.shape == shape[:-1] and vectors.shape == shape
    values, vectors = torch.linalg.eigh(torch.zeros(2, 4, 4).to(TPU))
    assert_close(values, torch.zeros(2, 4))
    assert_orthonormal_columns(vectors)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_grad_gauge_invariant(dtype):
    # Weighted eigenvalues and V diag(w) V^T-like products do not depend on the vectors' signs.
    a = symmetric((2, 4, 4), dtype)
    weights = make((4,), dtype, low=-1, high=1)

    def loss(x):
        w, v = torch.linalg.eigh(x)
        c = weights.to(x.device)
        return torch.stack([(w * c).sum(-1), ((v * v) * c).sum((-2, -1))], -1)

    check_grads(loss, [a], dtype, rtol=1e-3 if dtype == torch.float32 else 1e-8)
    check_grads(lambda x: torch.linalg.eigvalsh(x, UPLO="U"), [a], dtype)


# ---- svd ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, full_matrices", [((5, 3), True), ((5, 3), False), ((3, 5), True), ((3, 5), False), ((2, 4, 4), True)]
)
def test_svd_shapes_and_values(dtype, shape, full_matrices):
    a = make(shape, dtype)
    u, s, vh = torch.linalg.svd(a.to(TPU), full_matrices=full_matrices)
    expected_u, expected_s, expected_vh = torch.linalg.svd(a, full_matrices=full_matrices)
    assert u.shape == expected_u.shape and vh.shape == expected_vh.shape
    assert_close(s, expected_s, **TOL[dtype])
    assert_orthonormal_columns(u, **TOL[dtype])
    assert_orthonormal_columns(vh.mT, **TOL[dtype])
    k = s.shape[-1]
    u, vh = u.cpu(), vh.cpu()
    torch.testing.assert_close((u[..., :k] * s.cpu().unsqueeze(-2)) @ vh[..., :k, :], a, **TOL[dtype])
    # Distinct singular values: the first k vectors are unique up to sign.
    torch.testing.assert_close(align_signs(u[..., :k], expected_u[..., :k]), expected_u[..., :k], **TOL[dtype])
    torch.testing.assert_close(
        align_signs(vh[..., :k, :].mT, expected_vh[..., :k, :].mT), expected_vh[..., :k, :].mT, **TOL[dtype]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_svdvals_svd_and_noncontiguous(dtype):
    a = make((2, 6, 4), dtype)
    assert_close(torch.linalg.svdvals(noncontiguous(a.to(TPU))), torch.linalg.svdvals(a), **TOL[dtype])
    u, s, v = torch.svd(a.to(TPU))
    expected_u, expected_s, expected_v = torch.svd(a)
    assert_close(s, expected_s, **TOL[dtype])
    torch.testing.assert_close(u.cpu().abs(), expected_u.abs(), **TOL[dtype])
    torch.testing.assert_close(v.cpu().abs(), expected_v.abs(), **TOL[dtype])
    out = [torch.empty(0, dtype=dtype, device=TPU) for _ in range(3)]
    torch.linalg.svd(a.to(TPU), full_matrices=False, out=out)
    assert_close(out[1], expected_s, **TOL[dtype])
    torch.testing.assert_close((out[0] * out[1].unsqueeze(-2) @ out[2]).cpu(), a, **TOL[dtype])
    # compute_uv=False: PyTorch returns zero-filled U and V.
    for actual, expected in zip(torch.svd(a.to(TPU), compute_uv=False), torch.svd(a, compute_uv=False), strict=True):
        assert_close(actual, expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_rank_deficient_completes_orthonormal_bases(dtype):
    # Rank 2 in 6 x 4, plus an exactly zero matrix: U must still be orthonormal.
    a = make((6, 2), dtype) @ make((2, 4), dtype)
    a = torch.stack([a, torch.zeros_like(a)])
    for full_matrices in [True, False]:
        u, s, vh = torch.linalg.svd(a.to(TPU), full_matrices=full_matrices)
        assert_close(s, torch.linalg.svdvals(a), rtol=TOL[dtype]["rtol"], atol=1e-5 * a.abs().max().item())
        assert_orthonormal_columns(u, **TOL[dtype])
        assert_orthonormal_columns(vh.mT, **TOL[dtype])
        k = s.shape[-1]
        rebuilt = (u.cpu()[..., :k] * s.cpu().unsqueeze(-2)) @ vh.cpu()
        torch.testing.assert_close(rebuilt, a, rtol=TOL[dtype]["rtol"], atol=1e-5 * a.abs().max().item())


def test_svd_zero_size():
    for shape in [(3, 0), (0, 3), (2, 0, 0)]:
        for full_matrices in [True, False]:
            a = torch.zeros(shape)
            for actual, expected in zip(
                torch.linalg.svd(a.to(TPU), full_matrices=full_matrices),
                torch.linalg.svd(a, full_matrices=full_matrices),
                strict=True,
            ):
                assert_close(actual, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_grad_gauge_invariant(dtype):
    a = make((2, 5, 3), dtype, low=-1, high=1)

    def loss(x):
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
        return torch.cat([s, ((u * s.unsqueeze(-2)) @ vh).flatten(-2), (vh * vh).sum(-2)], -1)

    check_grads(loss, [a], dtype, rtol=1e-3 if dtype == torch.float32 else 1e-8)
    check_grads(lambda x: torch.linalg.svdvals(x.mT), [a], dtype)


def test_non_finite_matrices_give_nan():
    # LAPACK fails on them and the CPU raises from its info, a host read; in the program the
    # failing matrix's results are NaN and the rest of the batch is unaffected.
    a = symmetric((3, 4, 4), torch.float64)
    a[1, 2, 1] = float("nan")
    a[2, 0, 3] = float("inf")  # upper triangle: eigh reads the lower one
    values, vectors = torch.linalg.eigh(a.to(TPU))
    assert values[1].isnan().all() and vectors[1].isnan().all()
    assert_close(values[[0, 2]], torch.linalg.eigvalsh(a[[0, 2]]), **TOL[torch.float64])
    u, s, vh = torch.linalg.svd(a.to(TPU))
    for result in (u, s, vh):
        assert result[1:].isnan().all() and not result[0].isnan().any()
    assert_close(s[0], torch.linalg.svdvals(a[0]), **TOL[torch.float64])


# ---- what PyTorch composes from eigh and svd ----


@pytest.mark.parametrize("dtype", DTYPES)
def test_pinv_and_norms_compose(dtype):
    a = make((2, 5, 3), dtype, low=-1, high=1)
    sym = symmetric((4, 4), dtype)
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float32 else TOL[dtype]
    cases = [
        (lambda x: torch.linalg.pinv(x), a),
        (lambda x: torch.pinverse(x.mT), a),
        (lambda x: torch.linalg.pinv(x, hermitian=True), sym),
        (lambda x: torch.linalg.matrix_norm(x, ord="nuc"), a),
        (lambda x: torch.linalg.matrix_norm(x, ord=2), a),
        (lambda x: torch.linalg.matrix_norm(x, ord=-2), a),
        (lambda x: torch.linalg.norm(x[0], ord="nuc"), a),
        (lambda x: torch.linalg.cond(x), sym),
    ]
    for fn, x in cases:
        assert_close(fn(x.to(TPU)), fn(x), **tol)
    if dtype == torch.float64:  # float32 gradients of svd are covered above; keep this file fast
        check_grads(lambda x: torch.linalg.pinv(x), [a], dtype, **tol)
        check_grads(lambda x: torch.linalg.matrix_norm(x, ord="nuc"), [a], dtype, **tol)


def test_matrix_rank_and_singular_pinv():
    a = make((3, 6, 2), torch.float64) @ make((3, 2, 5), torch.float64)
    a[1] = 0
    assert_close(torch.linalg.matrix_rank(a.to(TPU)), torch.linalg.matrix_rank(a))
    assert_close(torch.linalg.matrix_rank(a.to(TPU), hermitian=False, atol=1.0), torch.linalg.matrix_rank(a, atol=1.0))
    sym = a[0] @ a[0].mT
    assert_close(torch.linalg.matrix_rank(sym.to(TPU), hermitian=True), torch.linalg.matrix_rank(sym, hermitian=True))
    assert_close(torch.linalg.pinv(a.to(TPU)), torch.linalg.pinv(a), rtol=1e-8, atol=1e-10)


# ---- matrix_exp ----


def exact_matrix_exp(a: torch.Tensor) -> torch.Tensor:
    """exp of each matrix of a batch, computed with 40 significant digits (mpmath) and rounded to
    float64: a reference both the CPU's and our float64 results can be measured against."""
    import mpmath  # a dependency of torch (through sympy)

    with mpmath.workdps(40):
        exact = [mpmath.expm(mpmath.matrix(m.double().tolist())) for m in a]
        rows, cols = a.shape[-2:]
        return torch.tensor(
            [[[float(e[r, c]) for c in range(cols)] for r in range(rows)] for e in exact], dtype=torch.float64
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp_norm_ranges_batched(dtype):
    # Norms from below every threshold to many squarings, one batch so each matrix scales alone.
    base = make((4, 5, 5), torch.float64, low=-1, high=1)
    a = (base * torch.tensor([1e-3, 0.3, 2.0, 12.0], dtype=torch.float64).view(4, 1, 1)).to(dtype)
    actual = torch.linalg.matrix_exp(noncontiguous(a.to(TPU))).cpu().double()
    # Squaring amplifies rounding relative to the largest entry, on the CPU too: over 1,500 random
    # batches the CPU's own float64 result was up to 369 eps of the largest entry from the exact
    # one (ours up to 184), so the two approximations can differ by 400 eps while both are as
    # accurate as the CPU. Ours is measured against the exact value instead, to the CPU's accuracy.
    exact = exact_matrix_exp(a)
    scale = exact.abs().amax((-2, -1), keepdim=True)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(actual / scale, exact / scale, rtol=0, atol=400 * eps)
    assert_close(torch.matrix_exp(a[1].to(TPU)), torch.matrix_exp(a[1]), rtol=50 * eps, atol=50 * eps)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matrix_exp_reduced_precision(dtype):
    # Computed in float32 and rounded: compared with the CPU in float32, cast (the CPU's own
    # reduced-precision kernel loses accuracy, and NaNs for larger norms).
    a = make((2, 4, 4), torch.float32, low=-1, high=1).to(dtype)
    expected = torch.linalg.matrix_exp(a.float()).to(dtype)
    assert_close(torch.linalg.matrix_exp(a.to(TPU)), expected)


def test_matrix_exp_zero_size_and_identity_cases():
    assert_close(torch.linalg.matrix_exp(torch.zeros(2, 0, 0).to(TPU)), torch.zeros(2, 0, 0))
    assert_close(torch.linalg.matrix_exp(torch.zeros(3, 3).to(TPU)), torch.eye(3))
    d = torch.diag(torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64))
    assert_close(torch.linalg.matrix_exp(d.to(TPU)), torch.linalg.matrix_exp(d), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp_grad(dtype):
    # The backward is matrix_exp of a 2n x 2n block matrix: it composes.
    a = make((2, 3, 3), dtype, low=-1, high=1)
    check_grads(torch.linalg.matrix_exp, [a], dtype)


# ---- errors ----


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64])
def test_dtype_errors_match_cpu(dtype):
    a = make((3, 3), dtype)
    for fn in [torch.linalg.eigh, torch.linalg.eigvalsh, torch.linalg.svd, torch.linalg.svdvals]:
        assert_same_error(fn, a)
    if dtype == torch.int64:
        # PyTorch's Python meta function (which checks tpu arguments) names the dtype
        # "torch.int64" where the CPU kernel says "Long": the type and the rest match.
        kind, message = cpu_error(torch.linalg.matrix_exp, a)
        with pytest.raises(kind, match=re.escape(message.replace("Long", "torch.int64"))):
            torch.linalg.matrix_exp(a.to(TPU))


def test_argument_errors_match_cpu():
    assert_same_error(torch.linalg.eigh, make((3, 4)))
    assert_same_error(torch.linalg.eigh, make((3, 3)), UPLO="X")
    assert_same_error(torch.linalg.eigvalsh, make((3,)))
    assert_same_error(torch.linalg.matrix_exp, make((3, 4)))
    assert_same_error(torch.linalg.svd, make((3,)))
