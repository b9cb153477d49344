"""Householder QR on tpu against the CPU (LAPACK): geqrf's compact form, householder_product
(orgqr), ormqr, linalg.qr in every mode (and torch.qr), linalg.lstsq with each driver (gels,
and the rank-revealing gelsy, gelsd and gelss on full-rank and rank-deficient matrices), with
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


@pytest.mark.parametrize("driver", ["gels", "gelsy"])
def test_lstsq_complex64(driver):
    # The CPU's LAPACK has complex kernels; residuals and singular values come out real.
    a, b = well_conditioned((2, 6, 4), torch.complex64), make((2, 6, 3), torch.complex64)
    expected = torch.linalg.lstsq(a, b, driver=driver)
    actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver=driver)
    for name in ("solution", "rank", "singular_values"):
        assert_close(getattr(actual, name), getattr(expected, name), rtol=1e-4, atol=1e-5)
    # The residuals against their definition, |A x - b|^2 per column at the CPU's solution: the CPU
    # kernel's own complex residuals come out wrong under the tests' dispatch mode
    # (float32_reference.py), which they square in place through a conjugate view of themselves.
    exact = ((a.to(torch.complex128) @ expected.solution.to(torch.complex128) - b).abs() ** 2).sum(-2)
    reference = exact.to(torch.float32) if driver == "gels" else expected.residuals
    assert_close(actual.residuals, reference, rtol=1e-4, atol=1e-4)


def test_lstsq_complex64_rank_revealing_values():
    a, b = well_conditioned((5, 3), torch.complex64), make((5, 2), torch.complex64)
    for driver in ("gelsd", "gelss"):
        expected = torch.linalg.lstsq(a, b, driver=driver)
        actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver=driver)
        for name in ("solution", "rank", "singular_values"):
            assert_close(getattr(actual, name), getattr(expected, name), rtol=1e-4, atol=1e-5)


def test_lstsq_errors():
    a = make((3, 3))
    assert_same_error(torch.linalg.lstsq, make((3,)), make((3,)))
    assert_same_error(torch.linalg.lstsq, a, a.double())
    assert_same_error(torch.linalg.lstsq, a, make((2, 3, 3)))
    assert_same_error(torch.linalg.lstsq, a, make((4, 3)))
    assert_same_error(torch.linalg.lstsq, a, make((4,)))
    assert_same_error(torch.linalg.lstsq, a, a, driver="qr")
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        assert_same_error(torch.linalg.lstsq, a.bfloat16(), a.bfloat16(), driver=driver)
        assert_same_error(torch.linalg.lstsq, a.long(), a.long(), driver=driver)


# ---- linalg.lstsq, rank-revealing drivers (gelsy, gelsd, gelss) ----

RANK_REVEALING = ["gelsy", "gelsd", "gelss"]
LSTSQ_OUTPUTS = ("solution", "residuals", "rank", "singular_values")


def cpu_lstsq(a, b, **kwargs):
    """The CPU's answer. Its gelsy seems to read LAPACK's column pivots uninitialized: the rank it
    finds for a rank-deficient A (or one with a zero column) varies from call to call. So for
    gelsy the reference is what gelsy computes with its pivots right, the minimum-norm solution
    and the rank at rcond, which gelsd gives (the same for an rcond in (0, 1) or None)."""
    if kwargs.get("driver", "gelsy") not in ("gelsy", None):
        return torch.linalg.lstsq(a, b, **kwargs)
    rcond = kwargs.get("rcond")
    assert rcond is None or 0 < rcond < 1, "gelsd reads this rcond otherwise"
    gelsy = torch.linalg.lstsq(a, b, **kwargs)
    gelsd = torch.linalg.lstsq(a, b, **dict(kwargs, driver="gelsd"))
    return gelsd.solution, gelsy.residuals, gelsd.rank, gelsy.singular_values


def check_lstsq_driver(a, b, dtype, outputs=LSTSQ_OUTPUTS, **kwargs):
    expected = dict(zip(LSTSQ_OUTPUTS, cpu_lstsq(a, b, **kwargs), strict=True))
    actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), **kwargs)
    for name in outputs:
        assert_close(getattr(actual, name), expected[name], **TOL[dtype])


def of_rank(shape, rank, dtype):
    """Matrices of exactly `rank` (up to rounding): products of well-conditioned (m, rank) and
    (rank, n) factors, so the kept singular values sit far above any rcond used below."""
    left = well_conditioned(shape[:-1] + (rank,), torch.float64)
    right = well_conditioned(shape[:-2] + (rank, shape[-1]), torch.float64)
    return (left @ right).to(dtype)


# The CPU fills gelsd's and gelss's residuals when every matrix has full rank n < m: an output
# shape read from the data, which the meta function (csrc/aten/qr_meta.cc) cannot, so tpu leaves
# them empty (test_lstsq_residuals_of_full_rank_tall_gelsd_gelss).
def outputs_but_data_dependent_residuals(driver, a_shape):
    tall = a_shape[-2] > a_shape[-1]
    return LSTSQ_OUTPUTS if driver == "gelsy" or not tall else ("solution", "rank", "singular_values")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", RANK_REVEALING + [None])
@pytest.mark.parametrize(
    "a_shape, b_shape", [((6, 4), (6, 2)), ((2, 3, 5), (2, 3, 2)), ((2, 4, 4), (2, 4)), ((3, 5, 3), (1, 5, 2))]
)
def test_lstsq_rank_revealing_full_rank(dtype, driver, a_shape, b_shape):
    a, b = well_conditioned(a_shape, dtype), make(b_shape, dtype)
    outputs = outputs_but_data_dependent_residuals(driver or "gelsy", a_shape)
    check_lstsq_driver(a, b, dtype, outputs, driver=driver)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape, b_shape", [((6, 4), (6, 2)), ((3, 5), (3,)), ((4, 4), (4, 3))])
def test_lstsq_gelsy_full_rank_against_cpu_gelsy(dtype, a_shape, b_shape):
    # Of full rank, gelsy's answer does not depend on its pivots.
    a, b = well_conditioned(a_shape, dtype), make(b_shape, dtype)
    expected = torch.linalg.lstsq(a, b, driver="gelsy")
    actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver="gelsy")
    for name in LSTSQ_OUTPUTS:
        assert_close(getattr(actual, name), getattr(expected, name), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", RANK_REVEALING)
@pytest.mark.parametrize(
    "a_shape, rank, b_shape",
    [((7, 5), 3, (7, 2)), ((2, 4, 6), 2, (2, 4, 3)), ((3, 5, 5), 4, (3, 5)), ((4, 4), 1, (4,))],
)
def test_lstsq_rank_deficient(dtype, driver, a_shape, rank, b_shape):
    # The minimum-norm least-squares solution, and the rank at rcond well between the kept and
    # the rounding-sized singular values.
    a, b = of_rank(a_shape, rank, dtype), make(b_shape, dtype)
    rcond = 1e-4 if dtype == torch.float32 else 1e-10
    check_lstsq_driver(a, b, dtype, rcond=rcond, driver=driver)


@pytest.mark.parametrize("driver", RANK_REVEALING + [None])
def test_lstsq_default_rcond_drops_exact_zeros(driver):
    # Zero columns and rows: singular values exactly zero, dropped at the default rcond
    # (eps * max(m, n)).
    a = well_conditioned((2, 6, 4))
    a[0, :, 1] = 0
    a[1, 2:, :] = 0
    b = make((2, 6, 3))
    check_lstsq_driver(a, b, torch.float32, driver=driver)
    check_lstsq_driver(a.mT.contiguous(), make((2, 4, 3)), torch.float32, driver=driver)


def with_singular_values(values, m):
    """An (m, n) f64 matrix of the given singular values and random singular vectors."""
    u, _ = torch.linalg.qr(make((m, len(values)), torch.float64))
    v, _ = torch.linalg.qr(make((len(values), len(values)), torch.float64))
    return u @ torch.diag(torch.tensor(values, dtype=torch.float64)) @ v.mT


@pytest.mark.parametrize("driver", ["gelsd", "gelss"])
def test_lstsq_rcond_as_each_driver_reads_it(driver):
    # Singular values 4, 2, 1, 0.25: rcond 0.3 keeps two, 0.1 three. gelsd reads an rcond
    # outside (0, 1) as machine precision, gelss a negative one; gelss keeps none at rcond >= 1.
    a, b = with_singular_values([4.0, 2.0, 1.0, 0.25], 6), make((6, 2), torch.float64)
    for rcond in (-1.0, 0.0, 0.1, 0.3, 0.6, 1.0, 2.0):
        outputs = ("solution", "rank", "singular_values")
        actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), rcond=rcond, driver=driver)
        expected = torch.linalg.lstsq(a, b, rcond=rcond, driver=driver)
        for name in outputs:
            assert_close(getattr(actual, name), getattr(expected, name), **TOL[torch.float64])


def test_lstsq_gelsy_rcond():
    # gelsy keeps the leading columns of its pivoted QR whose condition number is below 1 / rcond,
    # at least one: with a clear gap (singular values 4, 2, 1e-13, 1e-14) rcond 1e-3 keeps two,
    # rcond <= 0 all of a full-rank A, rcond >= 1 one (its first pivot; tpu's rank-1 solution,
    # from the first singular triplet, is another).
    a, b = with_singular_values([4.0, 2.0, 1e-13, 1e-14], 6), make((6, 2), torch.float64)
    check_lstsq_driver(a, b, torch.float64, rcond=1e-3, driver="gelsy")
    a = with_singular_values([4.0, 2.0, 1.0, 0.25], 6)
    for rcond, outputs in [(-1.0, LSTSQ_OUTPUTS), (0.0, LSTSQ_OUTPUTS), (1.0, ("rank",)), (2.0, ("rank",))]:
        actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), rcond=rcond, driver="gelsy")
        expected = torch.linalg.lstsq(a, b, rcond=rcond, driver="gelsy")
        for name in outputs:
            assert_close(getattr(actual, name), getattr(expected, name), **TOL[torch.float64])


@pytest.mark.parametrize("driver", ["gelsy", "gelsd"])
@pytest.mark.parametrize("a_shape, b_shape", [((5, 3), (5, 2)), ((3, 5), (3,))])
def test_lstsq_rank_revealing_grad(driver, a_shape, b_shape):
    a, b = well_conditioned(a_shape), make(b_shape, low=-1, high=1)
    check_grads(lambda x, y: torch.linalg.lstsq(x, y, driver=driver).solution, [a, b], torch.float32)


@pytest.mark.parametrize("driver", RANK_REVEALING)
def test_lstsq_rank_revealing_noncontiguous_and_empty(driver):
    a, b = well_conditioned((3, 5)), make((3, 2))
    expected = torch.linalg.lstsq(a, b, driver=driver)
    actual = torch.linalg.lstsq(noncontiguous(a.to(TPU)), noncontiguous(b.to(TPU)), driver=driver)
    for name in LSTSQ_OUTPUTS:
        assert_close(getattr(actual, name), getattr(expected, name), **TOL[torch.float32])
    for a_shape, b_shape in [((0, 3), (0, 2)), ((4, 0), (4, 2)), ((2, 4, 0), (2, 4, 2))]:
        a, b = torch.empty(a_shape), make(b_shape)
        outputs = outputs_but_data_dependent_residuals(driver, a_shape)
        check_lstsq_driver(a, b, torch.float32, outputs, driver=driver)
    if driver == "gelsy":  # the CPU's gelsd and gelss reject (or crash on) no right-hand sides
        a, b = well_conditioned((2, 5, 3)), make((2, 5, 0))
        expected = torch.linalg.lstsq(a, b, driver=driver)
        actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver=driver)
        for name in LSTSQ_OUTPUTS:
            assert_close(getattr(actual, name), getattr(expected, name))


@pytest.mark.parametrize("driver", RANK_REVEALING)
def test_lstsq_rank_revealing_broadcast_a(driver):
    a, b = well_conditioned((1, 5, 3)), make((3, 5, 2))
    check_lstsq_driver(a, b, torch.float32, ("solution",), driver=driver)


# gelsd's and gelss's residuals exist only when every matrix has full rank n < m (linalg_lstsq
# reads the rank on the host, as the CPU does); the rank and singular values of an A broadcast
# against b keep A's own batch.
@pytest.mark.parametrize(
    "driver, a_shape, b_shape, output",
    [
        ("gelsd", (6, 4), (6, 2), "residuals"),
        ("gelss", (2, 6, 4), (2, 6, 2), "residuals"),
        ("gelsd", (6, 4), (6,), "residuals"),
        ("gelss", (1, 5, 3), (3, 5, 2), "rank"),
        ("gelsd", (1, 5, 3), (3, 5, 2), "singular_values"),
    ],
)
def test_lstsq_output_shapes_follow_the_cpu(driver, a_shape, b_shape, output):
    a, b = well_conditioned(a_shape), make(b_shape)
    check_lstsq_driver(a, b, torch.float32, (output,), driver=driver)


@pytest.mark.parametrize("driver", ["gelsd", "gelss"])
def test_lstsq_residuals_vanish_when_any_matrix_is_rank_deficient(driver):
    # One rank-deficient matrix in the batch empties the residuals of all, as on the CPU.
    a = torch.cat([well_conditioned((1, 6, 4)), of_rank((1, 6, 4), 2, torch.float32)])
    b = make((2, 6, 3))
    actual = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver=driver)
    expected = torch.linalg.lstsq(a, b, driver=driver)
    assert actual.residuals.shape == expected.residuals.shape == (0,)
    assert_close(actual.rank, expected.rank)
