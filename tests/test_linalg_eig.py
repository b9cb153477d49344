"""linalg.eig and linalg.eigvals on tpu (Hessenberg reduction and shifted QR iteration in the
program) against the CPU's LAPACK geev, with gradients and the CPU's errors.

The eigenvalues come in no specified order (torch.linalg.eig's documentation) and each
eigenvector is unique only up to a phase, so tpu's eigenvalues are matched to the CPU's before
comparing, and eigenvectors are compared through phase-invariant quantities."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous
from eigenvalue_order import matched_order
from linalg_helpers import assert_same_error, tpu_leaf

DTYPES = [torch.float32, torch.complex64]
# Two float32 algorithms for a non-normal matrix differ by about eps times the eigenvalue's
# condition number times |A|.
TOL = dict(rtol=1e-4, atol=1e-4)

pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def check_eig(a, **tol):
    """eig of the CPU tensor `a` on tpu against the CPU: the eigenvalues as a multiset, each
    eigenvector's magnitudes, unit norm and largest component real (geev's normalization), and
    A V = V diag(L)."""
    tolerance = dict(TOL, **tol)
    values, vectors = torch.linalg.eig(a.to(TPU))
    expected_values, expected_vectors = torch.linalg.eig(a)
    assert values.device.type == "tpu" and vectors.device.type == "tpu"
    assert values.dtype == expected_values.dtype and vectors.dtype == expected_vectors.dtype
    assert values.shape == expected_values.shape and vectors.shape == expected_vectors.shape
    order = matched_order(values.cpu(), expected_values)
    aligned_values = values.cpu().gather(-1, order)
    aligned_vectors = vectors.cpu().gather(-1, order.unsqueeze(-2).expand(vectors.shape))
    torch.testing.assert_close(aligned_values, expected_values, **tolerance)
    torch.testing.assert_close(aligned_vectors.abs(), expected_vectors.abs(), **tolerance)
    v = vectors.cpu()
    torch.testing.assert_close(v.abs().pow(2).sum(-2), torch.ones(v.shape[:-2] + v.shape[-1:]))
    largest = v.abs().argmax(-2, keepdim=True)
    assert v.gather(-2, largest).imag.abs().max() <= 1e-6
    assert (v.gather(-2, largest).real > 0).all()
    ac = a.to(v.dtype)
    scale = max(1.0, a.abs().max().item())
    torch.testing.assert_close(ac @ v, v * values.cpu().unsqueeze(-2), rtol=0, atol=1e-4 * scale * a.shape[-1])
    # eigvals gives eig's eigenvalues.
    torch.testing.assert_close(torch.linalg.eigvals(a.to(TPU)).cpu(), values.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (6, 6), (2, 3, 5, 5), (16, 16)])
def test_eig_matches_cpu(shape, dtype):
    check_eig(make(shape, dtype, low=-1, high=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eig_of_a_noncontiguous_view(dtype):
    a = make((3, 5, 5), dtype, low=-1, high=1)
    values, vectors = torch.linalg.eig(noncontiguous(a.to(TPU)))
    expected = torch.linalg.eigvals(a)
    order = matched_order(values.cpu(), expected)
    torch.testing.assert_close(values.cpu().gather(-1, order), expected, **TOL)


def rotation(angle):
    c, s = torch.cos(torch.tensor(angle)), torch.sin(torch.tensor(angle))
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


@pytest.mark.parametrize(
    "a",
    [
        torch.diag(torch.tensor([3.0, -1.0, 2.0, 0.5])),  # already triangular: no iteration
        torch.triu(torch.arange(1.0, 17.0).reshape(4, 4)),
        rotation(0.7),  # a complex-conjugate pair from a real matrix
        torch.zeros(3, 3),
        torch.eye(4),  # one eigenvalue repeated
        torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),  # a permutation: roots of unity
        torch.tensor([[1e3, 1.0], [1e-3, 1e-3]]),  # entries of very different magnitudes
        torch.tensor([[4.0, 1.0], [-2.0, 1.0]]) * 1e-30,  # tiny: scaled, not flushed
    ],
    ids=["diagonal", "triangular", "rotation", "zero", "identity", "permutation", "graded", "tiny"],
)
def test_eig_of_structured_matrices(a):
    check_eig(a, rtol=1e-5, atol=1e-5 * max(1.0, a.abs().max().item()))


def test_eig_of_a_defective_matrix():
    # A Jordan block: one eigenvalue, one eigenvector direction (LAPACK returns it twice, nearly
    # parallel). The eigenvalue and A v = lambda v hold; the second vector's exact direction does not.
    a = torch.tensor([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 2.0]])
    values, vectors = torch.linalg.eig(a.to(TPU))
    torch.testing.assert_close(values.cpu(), torch.full((3,), 2.0 + 0j), rtol=0, atol=1e-5)
    v = vectors.cpu()
    torch.testing.assert_close(a.to(v.dtype) @ v, v * values.cpu(), rtol=0, atol=1e-4)
    torch.testing.assert_close(v[:, 0].abs(), torch.tensor([1.0, 0.0, 0.0]), rtol=0, atol=1e-6)


def test_eig_of_empty_inputs():
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        a = torch.zeros(shape)
        values, vectors = torch.linalg.eig(a.to(TPU))
        expected_values, expected_vectors = torch.linalg.eig(a)
        assert_close(values, expected_values)
        assert_close(vectors, expected_vectors)


def test_eig_of_non_finite_input_raises_like_the_cpu():
    # eig reads on the host whether the input is finite, as the CPU (and CUDA) do.
    a = make((2, 3, 3), low=-1, high=1)
    a[0, 1, 2] = float("nan")
    assert_same_error(torch.linalg.eig, a)
    a[0, 1, 2] = float("inf")
    assert_same_error(torch.linalg.eig, a)


def test_eigvals_without_gradients_gives_nan_for_a_non_finite_matrix():
    # _linalg_eigvals (eigvals of a tensor that needs no gradient) does not check on the CPU
    # either; in the program the matrix's eigenvalues are NaN and the rest of the batch is
    # unaffected.
    a = make((2, 3, 3), low=-1, high=1)
    a[0, 1, 2] = float("nan")
    values = torch.ops.aten._linalg_eigvals(a.to(TPU)).cpu()
    assert values[0].isnan().all()
    expected = torch.linalg.eigvals(a[1])
    torch.testing.assert_close(values[1].gather(-1, matched_order(values[1], expected)), expected, **TOL)


def test_eig_out_variant():
    a = make((4, 4), low=-1, high=1)
    values, vectors = torch.linalg.eig(a.to(TPU))
    out_values = torch.empty(0, dtype=torch.complex64, device=TPU)
    out_vectors = torch.empty(0, dtype=torch.complex64, device=TPU)
    torch.linalg.eig(a.to(TPU), out=(out_values, out_vectors))
    torch.testing.assert_close(out_values.cpu(), values.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(out_vectors.cpu(), vectors.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eig_gradients_match_cpu(dtype):
    # A loss that depends neither on the eigenvalues' order nor on the eigenvectors' phases.
    def loss(a):
        values, vectors = torch.linalg.eig(a)
        return (values.real.pow(3) + values.abs()).sum() + vectors.abs().pow(4).sum()

    a = make((2, 4, 4), dtype, low=-1, high=1)
    cpu, tpu = a.clone().requires_grad_(), tpu_leaf(a)
    expected, actual = loss(cpu), loss(tpu)
    torch.testing.assert_close(actual.cpu(), expected.detach(), **TOL)
    expected.backward()
    actual.backward()
    torch.testing.assert_close(tpu.grad.cpu(), cpu.grad, rtol=1e-3, atol=1e-3)


def test_eigvals_gradients_match_cpu():
    a = make((5, 5), low=-1, high=1)
    cpu, tpu = a.clone().requires_grad_(), tpu_leaf(a)
    torch.linalg.eigvals(cpu).abs().sum().backward()
    torch.linalg.eigvals(tpu).abs().sum().backward()
    torch.testing.assert_close(tpu.grad.cpu(), cpu.grad, rtol=1e-3, atol=1e-3)


def test_eig_repeats_without_compiling():
    import torch_tpu.metrics

    torch.linalg.eig(make((6, 6)).to(TPU))[1].cpu()
    before = torch_tpu.metrics.snapshot()["compiles"]
    torch.linalg.eig(make((6, 6)).to(TPU))[1].cpu()
    assert torch_tpu.metrics.snapshot()["compiles"] == before


@pytest.mark.parametrize(
    "fn, a",
    [
        (torch.linalg.eig, torch.ones(2, 3)),
        (torch.linalg.eig, torch.ones(3, 3, dtype=torch.bfloat16)),
        (torch.linalg.eig, torch.ones(3)),
        (torch.linalg.eig, torch.ones(3, 3, dtype=torch.long)),
        (torch.linalg.eig, torch.full((3,), float("inf"))),  # the finiteness check comes first
        (torch.linalg.eigvals, torch.ones(2, 3)),
        (torch.linalg.eigvals, torch.ones(3, 3, dtype=torch.bfloat16)),
        (torch.linalg.eigvals, torch.ones(3)),
        (torch.linalg.eigvals, torch.ones(3, 3, dtype=torch.long)),
        # What eigvals calls for a tensor that needs no gradient (the tests' dispatch mode makes
        # torch.linalg.eigvals take eig's path).
        (torch.ops.aten._linalg_eigvals, torch.ones(3)),
        (torch.ops.aten._linalg_eigvals, torch.ones(3, 3, dtype=torch.long)),
        (torch.ops.aten._linalg_eigvals, torch.ones(3, 3, dtype=torch.bfloat16)),
    ],
    ids=[
        "eig-not-square",
        "eig-bfloat16",
        "eig-vector",
        "eig-int64",
        "eig-inf-vector",
        "eigvals-not-square",
        "eigvals-bfloat16",
        "eigvals-vector",
        "eigvals-int64",
        "_linalg_eigvals-vector",
        "_linalg_eigvals-int64",
        "_linalg_eigvals-bfloat16",
    ],
)
def test_eig_errors_match_cpu(fn, a):
    assert_same_error(fn, a)


def test_eig_of_float64_says_complex128_is_missing():
    # Its outputs would be complex128, a dtype tpu does not have.
    with pytest.raises(NotImplementedError, match="ComplexDouble"):
        torch.linalg.eig(torch.eye(3, dtype=torch.float64, device=TPU))
