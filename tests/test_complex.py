"""complex64 on tpu against the CPU: storage and views (view_as_real/view_as_complex, .real/.imag
written in place), arithmetic with complex tensors and Python complex numbers, the complex-only
ops, products (with lazy conjugate and negative views), variances and norms (real-valued),
linspace, cov, matrix_exp, the FFT family with stft/istft, gradients through them, and the error
for ops that do not take complex yet."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

C64 = torch.complex64


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def test_round_trip_and_noncontiguous_views():
    z = make((5, 6), C64)
    t = z.to(TPU)
    assert t.dtype == C64 and torch.equal(t.cpu(), z)
    assert_close(noncontiguous(t).contiguous(), z)
    assert_close(t[1:, ::2].mT.contiguous(), z[1:, ::2].mT.contiguous())


def test_view_as_real_and_complex_alias_the_storage():
    z = make((4, 3), C64)
    t = z.to(TPU)
    pairs = torch.view_as_real(t)
    assert_close(pairs, torch.view_as_real(z))
    pairs[:, 1, 0].fill_(7.0)  # writes the real part of column 1 through the float view
    expected = z.clone()
    expected[:, 1] = 7.0 + 1j * expected[:, 1].imag
    assert_close(t, expected)
    f = make((6, 2))
    assert_close(torch.view_as_complex(f.to(TPU)), torch.view_as_complex(f))


def test_real_and_imag_views_written_in_place():
    z = make((3, 4), C64)
    t = z.to(TPU)
    t.real.mul_(2)
    t.imag.add_(1)
    expected = torch.complex(z.real * 2, z.imag + 1)
    assert_close(t, expected)
    assert_close(t.real, expected.real)
    assert_close(t.imag, expected.imag)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a - 2 * b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: a * (2 - 3j) + 1j,
        lambda a, b: (1 + 2j) / a,
        lambda a, b: a + b.real,  # complex with float promotes to complex
        lambda a, b: torch.add(a, b, alpha=0.5 + 1j),
        lambda a, b: -a,
    ],
    ids=["add", "sub_alpha", "mul", "div", "python_complex", "rdiv", "with_float", "alpha", "neg"],
)
def test_arithmetic_broadcasts(fn):
    a, b = make((4, 1, 5), C64), make((3, 5), C64)
    assert_close(fn(a.to(TPU), b.to(TPU)), fn(a, b))


@pytest.mark.parametrize(
    "fn",
    [
        torch.abs,
        torch.angle,
        torch.exp,
        torch.log,
        torch.sqrt,
        torch.sin,
        torch.cos,
        torch.tanh,
        torch.reciprocal,
        torch.cosh,
        torch.sinh,
        torch.nn.functional.silu,
    ],
    ids=lambda f: f.__name__,
)
def test_unary(fn):
    z = make((4, 5), C64, low=-2, high=2)
    assert_close(fn(z.to(TPU)), fn(z), rtol=2e-6, atol=2e-5)


def test_angle_of_reals_and_conjugation():
    x = make((12,))
    x[0], x[1] = float("nan"), -0.0
    assert_close(torch.angle(x.to(TPU)), torch.angle(x))
    z = make((3, 4), C64)
    t = z.to(TPU)
    assert t.conj().is_conj()
    assert_close(t.conj().resolve_conj(), z.conj().resolve_conj())
    assert_close(torch.conj_physical(t), torch.conj_physical(z))
    assert torch.equal(t.conj().cpu(), z.conj())
    assert_close(t.conj() * t, (z.conj() * z))


def test_construction_reductions_and_selection():
    re, im = make((3, 4)), make((3, 4))
    assert_close(torch.complex(re.to(TPU), im.to(TPU)), torch.complex(re, im))
    r = make((3, 4), low=0, high=2)
    assert_close(torch.polar(r.to(TPU), im.to(TPU)), torch.polar(r, im))
    z = make((3, 4), C64)
    t = z.to(TPU)
    assert_close(t.sum(0), z.sum(0))
    assert_close(t.mean(), z.mean())
    assert_close(torch.cat([t, t.conj()], 1), torch.cat([z, z.conj()], 1))
    assert_close(torch.where(t.real > 0, t, 0), torch.where(z.real > 0, z, 0))
    assert torch.equal((t == t.conj()).cpu(), z == z.conj())
    filled = torch.empty(3, dtype=C64, device=TPU).fill_(1 - 2j)
    assert_close(filled, torch.full((3,), 1 - 2j, dtype=C64))
    assert_close(t.to(torch.float32), z.to(torch.float32))
    assert_close(re.to(TPU).to(C64), re.to(C64))


def test_products():
    a, b = make((2, 3, 4), C64), make((2, 4, 5), C64)
    assert_close(a.to(TPU) @ b.to(TPU), a @ b, rtol=1e-5, atol=1e-5)
    assert_close(a[0].to(TPU) @ b[0].to(TPU), a[0] @ b[0], rtol=1e-5, atol=1e-5)
    c = make((3, 5), C64)
    expected = torch.addmm(c, a[0], b[0], beta=1j, alpha=2)
    assert_close(torch.addmm(c.to(TPU), a[0].to(TPU), b[0].to(TPU), beta=1j, alpha=2), expected, rtol=1e-5, atol=1e-5)


def test_products_follow_the_precision_mode():
    """Under DEFAULT each of the four real products rounds its operands to bf16, as on a TPU."""
    a, b = make((8, 16), C64), make((16, 4), C64)
    with torch.tpu.precision("default"):
        actual = a.to(TPU) @ b.to(TPU)

    def rounded(x):
        return x.to(torch.bfloat16).to(torch.float32)

    ar, ai, br, bi = rounded(a.real), rounded(a.imag), rounded(b.real), rounded(b.imag)
    expected = torch.complex(ar @ br - ai @ bi, ar @ bi + ai @ br)
    assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    assert (actual.cpu() - a @ b).abs().max() > 1e-4  # not computed in f32


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a.conj() @ b,
        lambda a, b: a @ b.mH,
        lambda a, b: a.mH @ b.conj(),
        lambda a, b: torch.bmm(a[None].conj(), b[None]),
        lambda a, b: torch.addmm(a.conj(), a, b.conj(), beta=2, alpha=1j),
        lambda a, b: torch.baddbmm(a[None].conj(), a[None], b[None].conj()),
        lambda a, b: torch.dot(a[0].conj(), b[1]),
        lambda a, b: torch.vdot(a[0], b[1]),
        lambda a, b: torch.vdot(a[0].conj(), b[1].conj()),
        lambda a, b: torch.linalg.vecdot(a, b),
        lambda a, b: a.conj().imag @ b.real,  # a negative view
    ],
)
def test_products_read_lazy_conjugate_and_negative_bits(fn):
    """mm, dot, vdot, addmm, baddbmm take conjugate views as they are; the lowering must see
    their values."""
    a, b = make((4, 4), C64), make((4, 4), C64)
    with torch.tpu.precision("highest"):
        actual = fn(a.to(TPU), b.to(TPU))
    expected = fn(a, b)
    assert_close(actual.resolve_conj().resolve_neg(), expected.resolve_conj().resolve_neg(), rtol=1e-5, atol=1e-5)


def test_writes_into_a_conjugate_view():
    z = make((3, 4), C64)
    t = z.to(TPU)
    view = t.conj()
    view.mul_(2j)
    expected = z.clone()
    expected.conj().mul_(2j)
    assert_close(t, expected)


@pytest.mark.parametrize(
    "fn",
    [
        torch.var,
        lambda x: torch.std(x, 1),
        lambda x: torch.var(x, (0, 2), keepdim=True),
        lambda x: torch.std(x, 0, unbiased=False),
        lambda x: torch.var(x, 2, correction=2),
        lambda x: torch.var_mean(x, 1),
        lambda x: torch.std_mean(x, (1, 2), correction=0),
        lambda x: torch.std_mean(x),
    ],
)
def test_variance_is_real(fn):
    z = make((3, 4, 5), C64)
    actual, expected = fn(z.to(TPU)), fn(z)
    for a, e in zip(actual, expected, strict=True) if isinstance(expected, tuple) else [(actual, expected)]:
        assert_close(a, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "fn",
    [
        torch.linalg.vector_norm,
        lambda x: torch.linalg.vector_norm(x, 1, 1),
        lambda x: torch.linalg.vector_norm(x, 0, (0, 2)),
        lambda x: torch.linalg.vector_norm(x, 3.5, 2, keepdim=True),
        lambda x: torch.linalg.vector_norm(x, float("inf"), 0),
        lambda x: torch.linalg.vector_norm(x, -float("inf")),
        lambda x: torch.norm(x),
        lambda x: torch.norm(x, p=1, dim=2),
        lambda x: torch.linalg.matrix_norm(x),
        lambda x: torch.nn.functional.normalize(x, dim=1),
        lambda x: torch.dist(x, x.flip(0), 3),
        lambda x: torch.nn.functional.pairwise_distance(x[0], x[1]),
        lambda x: torch.renorm(x, 2, 1, 5.0),
        lambda x: torch.renorm(x, float("inf"), 0, 2.0),
    ],
)
def test_norms_take_magnitudes(fn):
    z = make((3, 4, 5), C64)
    assert_close(fn(z.to(TPU)), fn(z), rtol=1e-5, atol=1e-5)


def test_linspace_cov_corrcoef_and_matrix_exp():
    for start, end, steps in [(1 + 2j, -3 + 0.5j, 7), (2j, 4.0, 6), (1 - 1j, 1 - 1j, 1)]:
        actual = torch.linspace(start, end, steps, dtype=C64, device=TPU)
        assert_close(actual, torch.linspace(start, end, steps, dtype=C64))
    z = make((3, 6), C64)
    with torch.tpu.precision("highest"):
        assert_close(torch.cov(z.to(TPU)), torch.cov(z), rtol=1e-5, atol=1e-5)
        assert_close(torch.corrcoef(z.to(TPU)), torch.corrcoef(z), rtol=1e-5, atol=1e-5)
        a = make((2, 4, 4), C64, low=-1, high=1)
        assert_close(torch.linalg.matrix_exp(a.to(TPU)), torch.linalg.matrix_exp(a), rtol=1e-5, atol=1e-5)


def test_real_tensors_under_the_complex_helpers():
    x = make((3, 4))
    t = x.to(TPU)
    assert not torch.is_complex(t) and torch.is_complex(t.to(C64))
    assert t.real is not None and torch.equal(t.real.cpu(), x.real)
    assert t.conj() is t and not t.conj().is_conj()
    z = make((3, 4), C64)
    z[0, 0] = 2.5
    assert torch.equal(torch.isreal(t).cpu(), torch.isreal(x))
    assert torch.equal(torch.isreal(z.to(TPU)).cpu(), torch.isreal(z))
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex tensors"):
        torch.view_as_real(t)
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        t.imag  # noqa: B018
    with pytest.raises(NotImplementedError, match="ComplexDouble"):
        torch.zeros(2, dtype=torch.complex128).to(TPU)


FFTS = [
    ("fft", {}),
    ("fft", {"n": 12, "norm": "ortho"}),
    ("ifft", {"n": 5, "dim": 0}),
    ("rfft", {"norm": "forward"}),
    ("irfft", {}),
    ("irfft", {"n": 9}),
    ("hfft", {"n": 10}),
    ("ihfft", {}),
    ("fft2", {}),
    ("ifft2", {"norm": "ortho"}),
    ("rfft2", {}),
    ("irfft2", {"s": (6, 7)}),
    ("fftn", {"dim": (0, 2)}),
    ("ifftn", {}),
    ("rfftn", {"dim": (2, 0)}),
    ("irfftn", {}),
    ("hfftn", {}),
    ("ihfftn", {}),
]


@pytest.mark.parametrize("dtype", [torch.float32, C64], ids=["f32", "c64"])
@pytest.mark.parametrize("name,kwargs", FFTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FFTS)])
def test_fft_family(name, kwargs, dtype):
    fn = getattr(torch.fft, name)
    x = make((4, 6, 8), dtype)
    if dtype.is_complex and name in ("rfft", "rfft2", "rfftn", "ihfft", "ihfftn"):
        pytest.skip("real-input transforms")
    assert_close(fn(x.to(TPU), **kwargs), fn(x, **kwargs), rtol=1e-5, atol=3e-5)


def test_fft_of_noncontiguous_input_and_helpers():
    x = make((6, 8), C64)
    assert_close(torch.fft.fft(noncontiguous(x.to(TPU)), dim=0), torch.fft.fft(x, dim=0), rtol=1e-5, atol=3e-5)
    y = torch.fft.fftshift(torch.fft.fft(x.to(TPU)))
    assert_close(y, torch.fft.fftshift(torch.fft.fft(x)), rtol=1e-5, atol=3e-5)


def test_stft_and_istft():
    signal = make((2, 200))
    window = torch.hann_window(32)
    expected = torch.stft(signal, 32, hop_length=8, window=window, return_complex=True)
    actual = torch.stft(signal.to(TPU), 32, hop_length=8, window=window.to(TPU), return_complex=True)
    assert_close(actual, expected, rtol=1e-5, atol=5e-5)
    back = torch.istft(actual, 32, hop_length=8, window=window.to(TPU), length=200)
    assert_close(back, torch.istft(expected, 32, hop_length=8, window=window, length=200), rtol=1e-5, atol=5e-5)
    assert_close(back, signal, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.fft.rfft(x).abs().sum(),
        lambda x: torch.view_as_real(torch.fft.fft(x, norm="ortho")).pow(2).sum(),
        lambda x: torch.fft.irfft(torch.fft.rfft(x) * (1 + 0.5j)).pow(2).sum(),
    ],
    ids=["rfft_abs", "fft_view_as_real", "rfft_irfft"],
)
def test_gradients_through_ffts(fn):
    x = make((3, 16))
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    fn(xc).backward()
    fn(xt).backward()
    assert_close(xt.grad, xc.grad, rtol=1e-5, atol=1e-4)


def test_fused_mode_runs_an_fft_chain_as_one_program():
    x = make((8, 32))
    with torch_tpu.execution_mode("defer_and_fuse"):
        t = x.to(TPU)
        torch_tpu.metrics.reset()
        y = torch.fft.irfft(torch.fft.rfft(t) * torch.fft.rfft(t).conj(), n=32)
        result = y.cpu()
        executions = torch_tpu.metrics.snapshot()["executions"]
    assert executions == 1
    torch.testing.assert_close(
        result, torch.fft.irfft(torch.fft.rfft(x) * torch.fft.rfft(x).conj(), n=32), rtol=1e-5, atol=1e-4
    )


def test_pow_special_exponents_and_zero_base():
    z = make((4, 5), C64, low=-4, high=4)
    t = z.to(TPU)
    for exponent in [2, 3, -2, 0.5, -0.5, -1, 0, 1, 2 + 0j, 2.5, 1 - 2j]:
        assert_close(t**exponent, z**exponent, rtol=2e-6)
    assert_close(torch.pow(1, t), torch.pow(1, z))
    # 0^z as C's cpow: 0 for Re z > 0, inf + NaN i for Re z < 0, NaN + NaN i for Re z == 0 (0^0 too).
    exponents = torch.tensor([1 + 1j, -1 + 1j, 1j, -1j, 0j, 2, -2, 0.5 - 3j, -0.5], dtype=C64)
    assert_close(0 ** exponents.to(TPU), 0**exponents)
    zeros = torch.zeros(9, dtype=C64)
    assert_close(zeros.to(TPU) ** exponents.to(TPU), zeros**exponents)


def test_pow_rounds_like_the_cpu():
    # Large angles (Im(e log b) ~ 20): the CPU's cexpf(e * clogf(b)) rounds the angle to f32, so
    # another formula lands ~1e-6 relative away. What is left comes from glibc's atan2f, 1 ulp off
    # in ~1 in 5 angles here (the f64 one rounded is not), times |e| up to 10: up to 4.3e-6 measured.
    base = make((400,), C64, low=-9, high=9)
    exponent = make((400,), C64, low=2, high=7)
    assert_close(base.to(TPU) ** exponent.to(TPU), base**exponent, rtol=6e-6)
    assert_close(2.5 ** exponent.to(TPU), 2.5**exponent, rtol=6e-6)


def test_logaddexp():
    a, b = make((4, 1, 5), C64), make((3, 5), C64)
    assert_close(torch.logaddexp(a.to(TPU), b.to(TPU)), torch.logaddexp(a, b), rtol=2e-6)
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([complex(-inf, 1), complex(inf, 0.5), complex(nan, 0), complex(1, nan), 2 + 1j], dtype=C64)
    y = torch.tensor([complex(-inf, 2), complex(inf, 0.25), 1 + 1j, 1 + 1j, complex(-inf, 0)], dtype=C64)
    assert_close(torch.logaddexp(x.to(TPU), y.to(TPU)), torch.logaddexp(x, y))


def test_logcumsumexp_runs_in_the_cpus_order():
    # Sequential like the CPU's loop: the imaginary parts (not reduced to the principal branch)
    # follow the same combination order.
    z = make((4, 6, 3), C64, low=-4, high=4)
    for dim in (0, 1, -1):
        assert_close(torch.logcumsumexp(z.to(TPU), dim), torch.logcumsumexp(z, dim), rtol=2e-6, atol=2e-5)
    assert_close(torch.logcumsumexp(noncontiguous(z[0].to(TPU)), 0), torch.logcumsumexp(noncontiguous(z[0]), 0))
    scalar = torch.tensor(1 + 2j, dtype=C64)
    assert_close(torch.logcumsumexp(scalar.to(TPU), 0), torch.logcumsumexp(scalar, 0))
    inf = float("inf")
    edges = torch.tensor([complex(-inf, 0), 1 + 1j, complex(-inf, 2), complex(inf, 0.5), 2 - 1j], dtype=C64)
    assert_close(torch.logcumsumexp(edges.to(TPU), 0), torch.logcumsumexp(edges, 0))


def test_lerp_and_accumulating_index_put():
    a, b, w = make((4, 5), C64), make((4, 5), C64), make((4, 5), C64, low=-1, high=1)
    ta, tb = a.to(TPU), b.to(TPU)
    assert_close(torch.lerp(ta, tb, w.to(TPU)), torch.lerp(a, b, w))
    for weight in (0.3, 0.8, 0.25 + 0.5j, 1):
        assert_close(torch.lerp(ta, tb, weight), torch.lerp(a, b, weight))
    values = make((4, 5), C64)
    unique, repeated = torch.tensor([2, 0, 3]), torch.tensor([0, 2, 0, 3])  # repeats sum when accumulating
    assert_close(ta.index_put((unique.to(TPU),), values[:3].to(TPU)), a.index_put((unique,), values[:3]))
    assert_close(
        ta.index_put((repeated.to(TPU),), values.to(TPU), accumulate=True),
        a.index_put((repeated,), values, accumulate=True),
    )


def test_ops_without_complex_support_raise():
    t = make((3, 3), C64).to(TPU)
    with pytest.raises(NotImplementedError, match=r"aten::reflection_pad2d.*ComplexFloat.*complex64 is not supported"):
        torch.nn.functional.pad(t.unsqueeze(0), (1, 1, 1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="ComplexDouble"):
        torch.zeros(2, dtype=torch.complex128, device=TPU) + 1
