"""The remaining special functions (xlog1py, entr, erfcx, log_ndtr, ndtri, spherical_bessel_j0,
modified_bessel_i0/i1, zeta, polygamma, gcd, lcm and the orthogonal polynomials): forward against the CPU on
random inputs and edge values, dtypes, promotion, broadcasting, out= and backward."""

import math

import pytest
import torch
from conftest import TPU, assert_close, assert_elementwise_matches, make, noncontiguous

S = torch.special
NAN, INF = float("nan"), float("inf")
EDGES = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5]

# (function, input range). f32 tolerances from the largest errors measured against the CPU over
# these ranges: erfcx 5e-7 relative (e^(x^2) erfc(x) below 2, the continued fraction above),
# log_ndtr 2e-6 relative on results near 0 (covered by atol), ndtri 4.3e-7, the modified Bessel
# functions 6.3e-7 (i0/i1's own series, not Cephes'); the others within 2e-7.
UNARY = {
    "entr": (S.entr, (-2.0, 10.0)),
    "erfcx": (S.erfcx, (-9.0, 60.0)),
    "log_ndtr": (S.log_ndtr, (-30.0, 10.0)),
    "ndtri": (S.ndtri, (0.0, 1.0)),
    "spherical_bessel_j0": (S.spherical_bessel_j0, (-30.0, 30.0)),
    "modified_bessel_i0": (S.modified_bessel_i0, (-80.0, 80.0)),
    "modified_bessel_i1": (S.modified_bessel_i1, (-80.0, 80.0)),
}
# The CPU kernels of these exist for float and double only.
FLOAT_OR_DOUBLE_ONLY = [name for name in UNARY if name != "entr"]


def unary_input(name, dtype=torch.float32):
    low, high = UNARY[name][1]
    return torch.cat([make((400,), torch.float32, low, high), torch.tensor(EDGES)]).to(dtype)


@pytest.mark.parametrize("name", UNARY)
def test_unary_float32(name):
    fn = UNARY[name][0]
    assert_elementwise_matches(fn, unary_input(name))


@pytest.mark.parametrize("name", UNARY)
def test_unary_float64(name):
    fn = UNARY[name][0]
    x = unary_input(name, torch.float64)
    # f64 results are within 2e-14 relative, except the modified Bessel functions: i0/i1's
    # series and expansion are sized for f32 and measured within 2e-10 relative in f64, and
    # log_ndtr, whose log of erfc near its zero was measured up to 2.6e-14 over 20 seeds (2e-14
    # failed about 1 run in 3).
    rtol = 5e-10 if name.startswith("modified_bessel") else 5e-14 if name == "log_ndtr" else 2e-14
    assert_close(fn(x.to(TPU)), fn(x), rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("name", UNARY)
def test_unary_integer_inputs_promote_to_float(name, dtype):
    fn = UNARY[name][0]
    x = make((6, 5), dtype, -5, 5)
    assert_close(fn(x.to(TPU)), fn(x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", FLOAT_OR_DOUBLE_ONLY)
def test_half_types_rejected_like_the_cpu(name, dtype):
    fn = UNARY[name][0]
    with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented for'):
        fn(torch.ones(3, dtype=dtype, device=TPU))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_entr_half_types(dtype):
    x = unary_input("entr", dtype)
    assert_close(S.entr(x.to(TPU)), S.entr(x))


@pytest.mark.parametrize("name", UNARY)
def test_unary_out(name):
    fn = UNARY[name][0]
    x = unary_input(name)
    out = torch.empty(0, device=TPU)
    fn(x.to(TPU), out=out)
    assert_close(out, fn(x))
    # A non-contiguous out= view is written through.
    base = torch.zeros(len(x), 2, device=TPU)
    fn(x.to(TPU), out=base[:, 1])
    assert_close(base[:, 1], fn(x))


@pytest.mark.parametrize("name", ["entr", "erfcx", "log_ndtr", "ndtri"])
def test_unary_backward(name):
    fn = UNARY[name][0]
    low, high = {"entr": (0.1, 5.0), "ndtri": (0.05, 0.95)}.get(name, (-5.0, 5.0))
    x = make((30,), torch.float32, low, high)
    grad = make((30,), torch.float32)
    expected = torch.autograd.grad(fn(x.requires_grad_()), x, grad)[0]
    xt = x.detach().to(TPU).requires_grad_()
    actual = torch.autograd.grad(fn(xt), xt, grad.to(TPU))[0]
    assert_close(actual, expected)


# ---- xlog1py and zeta ----


def xlog1py_inputs(dtype=torch.float32):
    x = torch.cat([make((5, 6), torch.float32, -3, 3), torch.tensor([[0.0, 0.0, NAN, 1.0, INF, 2.0]])])
    y = torch.cat([make((5, 6), torch.float32, -0.9, 5), torch.tensor([[NAN, -1.0, 1.0, -1.0, 2.0, INF]])])
    return x.to(dtype), y.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_xlog1py(dtype):
    x, y = xlog1py_inputs(dtype)
    assert_close(S.xlog1py(x.to(TPU), y.to(TPU)), S.xlog1py(x, y))
    assert_close(S.xlog1py(noncontiguous(x.to(TPU)), y.to(TPU)), S.xlog1py(x, y))


def test_xlog1py_broadcasting_scalars_promotion_and_out():
    x, y = xlog1py_inputs()
    assert_close(S.xlog1py(x[:, :1].to(TPU), y[0].to(TPU)), S.xlog1py(x[:, :1], y[0]))
    assert_close(S.xlog1py(2.5, y.to(TPU)), S.xlog1py(2.5, y))
    assert_close(S.xlog1py(x.to(TPU), 0.5), S.xlog1py(x, 0.5))
    ints = make((4, 4), torch.int64, 0, 5)
    assert_close(S.xlog1py(ints.to(TPU), y[:4, :4].to(TPU)), S.xlog1py(ints, y[:4, :4]))
    assert_close(S.xlog1py(ints.to(TPU), ints.to(TPU)), S.xlog1py(ints, ints))
    out = torch.empty(0, device=TPU)
    S.xlog1py(x.to(TPU), y.to(TPU), out=out)
    assert_close(out, S.xlog1py(x, y))


def test_xlog1py_backward():
    x, y = make((4, 5), torch.float32), make((4, 5), torch.float32, -0.5, 3)
    xc, yc = x.clone().requires_grad_(), y.clone().requires_grad_()
    expected = torch.autograd.grad(S.xlog1py(xc, yc).sum(), (xc, yc))
    xt, yt = x.to(TPU).requires_grad_(), y.to(TPU).requires_grad_()
    actual = torch.autograd.grad(S.xlog1py(xt, yt).sum(), (xt, yt))
    assert_close(actual[0], expected[0])
    assert_close(actual[1], expected[1])


def test_zeta():
    x = torch.cat([make((200,), torch.float32, 1.0, 12.0), torch.tensor([1.0, 0.5, 2.0, 3.0, 2.0, 2.5, NAN, 2.0])])
    q = torch.cat([make((200,), torch.float32, 0.1, 10.0), torch.tensor([1.0, 1.0, 0.0, -2.0, -1.5, -1.5, 1.0, INF])])
    # chlo.zeta in f32 against the CPU's double accumulation: within 3.4e-7 relative measured.
    assert_close(S.zeta(x.to(TPU), q.to(TPU)), S.zeta(x, q))
    assert_close(S.zeta(x.to(TPU), 2.0), S.zeta(x, 2.0))
    with pytest.raises(NotImplementedError, match='"zeta_cpu" not implemented'):
        S.zeta(x.bfloat16().to(TPU), q.bfloat16().to(TPU))


def polygamma_input(dtype=torch.float32):
    # Poles (non-positive integers, ±0) and non-finite values beside fresh random points either side.
    edges = [0.0, -0.0, -1.0, -4.0, NAN, INF, -INF, 1.0, 1e-3, 40.0]
    return torch.cat([make((300,), torch.float32, -9.0, 9.0), torch.tensor(edges)]).to(dtype)


def zeta_series_magnitude(n, x):
    """n! * sum over k >= 0 of |x + k|^-(n+1), in f64: the size of the terms that polygamma's zeta
    series adds. For x < 0 terms of both signs cancel, and an f32 sum is accurate to a few ulps of
    this, not of the result."""
    x = x.double()
    shift = torch.ceil(-x).clamp(min=0)
    total = S.zeta(torch.full_like(x, n + 1.0), x + shift)
    for k in range(int(shift[shift.isfinite()].max().item()) + 1):
        total += torch.where(k < shift, (x + k).abs().pow(-(n + 1)), 0.0)
    return math.factorial(n) * total


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 6])
def test_polygamma_float32_and_float64(n):
    x = polygamma_input()
    exact = torch.polygamma(n, x.double())
    actual = torch.polygamma(n, x.to(TPU)).cpu()
    assert actual.dtype == torch.float32
    assert torch.equal(actual.isnan(), exact.float().isnan())
    error = (actual.double() - exact).abs()
    representable = exact.float().isfinite()
    if n < 2:
        # digamma and trigamma by reflection, recurrence and the asymptotic series in f32, as the
        # CPU. Near the poles sin(pi x) loses digits the same way on both, so where the CPU's own
        # error exceeds 4e-5 relative ours may be 3 times it (at most 0.34 of this over 1,500 seeds).
        cpu_error = (torch.polygamma(n, x).double() - exact).abs()
        assert (error <= torch.maximum(4e-5 * exact.abs() + 1e-5, 3 * cpu_error))[representable].all()
    else:
        # The CPU sums the zeta series in double (CUDA in float). Ours sums it in f32 and was
        # within 4.0 ulps of the terms' magnitude over 1,500 seeds of 300 points for n = 2..6
        # (near negative half-integers that is up to 1e-4 of the result, where the CPU is within
        # 1e-7). Allow twice that.
        allowed = 8 * torch.finfo(torch.float32).eps * zeta_series_magnitude(n, x)
        assert (error <= allowed)[representable].all()
    assert_close(S.polygamma(n, x.double().to(TPU)), S.polygamma(n, x.double()), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [0, 2, 3])
def test_polygamma_half_types_compute_in_float32(n, dtype):
    x = polygamma_input(dtype)
    expected = torch.polygamma(n, x.float()).to(dtype)
    assert_close(torch.polygamma(n, x.to(TPU)), expected, rtol=1e-2, atol=1e-3)


def test_polygamma_poles_integers_out_and_backward():
    poles = torch.tensor([0.0, -1.0, -3.0, -INF])
    for n in (2, 3):
        result = torch.polygamma(n, poles.to(TPU)).cpu()
        assert torch.equal(result, torch.polygamma(n, poles)) and result.isinf().all()
    ints = make((3, 4), torch.int64, -3, 6)
    assert_close(torch.polygamma(2, ints.to(TPU)), torch.polygamma(2, ints))
    x = make((3, 4), torch.float32, 0.5, 4.0)
    out = torch.empty(0, device=TPU)
    torch.polygamma(3, x.to(TPU), out=out)
    assert_close(out, torch.polygamma(3, x))
    # d/dx polygamma(n, x) = polygamma(n + 1, x); digamma's gradient is polygamma(1, x).
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    expected = torch.autograd.grad(torch.polygamma(2, xc).sum(), xc)[0]
    assert_close(torch.autograd.grad(torch.polygamma(2, xt).sum(), xt)[0], expected, rtol=1e-5)
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, x.to(TPU))


def test_zeta_negative_q():
    # q < 0 with integer x: the CPU sums (q + k)^-x up to q + k > 0, where chlo.zeta alone is off.
    x = torch.tensor([2.0, 3.0, 4.0, 5.0, 7.0]).repeat(40)
    q = make((200,), torch.float32, -9.0, -0.01)
    assert_close(S.zeta(x.to(TPU), q.to(TPU)), S.zeta(x, q), rtol=2e-6)  # 4.1e-7 measured
    assert_close(S.zeta(x.double().to(TPU), q.double().to(TPU)), S.zeta(x.double(), q.double()), rtol=1e-9)


# ---- gcd and lcm ----


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("fn", [torch.gcd, torch.lcm])
def test_gcd_lcm(fn, dtype):
    a = torch.cat([make((300,), torch.int64, -1000, 1000), torch.tensor([0, 0, 7, -128, 12])]).to(dtype)
    b = torch.cat([make((300,), torch.int64, -1000, 1000), torch.tensor([0, 5, 0, 6, -18])]).to(dtype)
    assert_close(fn(a.to(TPU), b.to(TPU)), fn(a, b))


def test_gcd_lcm_broadcasting_noncontiguous_out_and_dtypes():
    a, b = make((6, 1), torch.int64, -60, 60), make((1, 7), torch.int32, -60, 60)
    assert_close(torch.gcd(a.to(TPU), b.to(TPU)), torch.gcd(a, b))
    grid = make((5, 5), torch.int64, -60, 60)
    assert_close(torch.lcm(noncontiguous(grid.to(TPU)), grid.to(TPU)), torch.lcm(grid, grid))
    out = torch.empty(0, dtype=torch.int64, device=TPU)
    torch.lcm(a.to(TPU), b.to(TPU), out=out)
    assert_close(out, torch.lcm(a, b))
    x = torch.ones(3, device=TPU)
    with pytest.raises(NotImplementedError, match="\"gcd_cpu\" not implemented for 'Float'"):
        torch.gcd(x, x)


# ---- orthogonal polynomials ----

POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]
DEGREES = [-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 12.0, 20.0, 2.7, NAN, INF, -INF]
# The closed forms (cos(n acos y) and the like) multiply acos's rounding (a few ulp in chlo.acos,
# half an ulp in glibc) by n, and V and W scale it by up to 2n + 1: at n = 20 the error measured
# over repeated draws reaches 2.5e-5 absolute near zeros and 5.5e-6 relative on values near
# 2n + 1; below n = 7 (the recurrence) it is within 1e-6.
POLYNOMIAL_TOLERANCE = dict(rtol=1e-5, atol=5e-5)


def polynomial_x(name):
    low, high = (-0.2, 1.2) if name.startswith("shifted") else (-1.5, 1.5)
    if name.startswith(("hermite", "laguerre")):
        low, high = -4.0, 6.0
    # Edge values of every family; NaN x is left out: several CPU kernels then return an
    # uninitialized value (their loop's result variable is never assigned).
    return torch.cat([make((40,), torch.float32, low, high), torch.tensor([1.0, -1.0, 0.0, 0.5, INF, -INF])])


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_per_element_degree(name):
    fn = getattr(S, name)
    x = polynomial_x(name)[:, None]
    n = torch.tensor(DEGREES)[None, :]
    assert_close(fn(x.to(TPU), n.to(TPU)), fn(x, n), **POLYNOMIAL_TOLERANCE)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_scalar_degree_integer_inputs_and_out(name):
    fn = getattr(S, name)
    x = polynomial_x(name)
    assert_close(fn(x.to(TPU), 5), fn(x, 5), **POLYNOMIAL_TOLERANCE)
    assert_close(fn(0.25, torch.tensor(DEGREES[:14]).to(TPU)), fn(0.25, torch.tensor(DEGREES[:14])))
    n_int = make((8, 1), torch.int64, -2, 12)
    x_int = make((1, 5), torch.int64, -2, 3)
    assert_close(fn(x_int.to(TPU), n_int.to(TPU)), fn(x_int, n_int), **POLYNOMIAL_TOLERANCE)
    out = torch.empty(0, device=TPU)
    fn(x.to(TPU), 3, out=out)
    assert_close(out, fn(x, 3), **POLYNOMIAL_TOLERANCE)
    with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented'):
        fn(x.bfloat16().to(TPU), 2)


def test_polynomial_nan_x_chebyshev_t_and_hermite():
    # These kernels initialize their result, so NaN x gives NaN for every n >= 1.
    x = torch.tensor([NAN, 0.5])[:, None]
    n = torch.tensor(DEGREES)[None, :]
    for name in ["chebyshev_polynomial_t", "hermite_polynomial_h", "hermite_polynomial_he"]:
        fn = getattr(S, name)
        assert_close(fn(x.to(TPU), n.to(TPU)), fn(x, n))


def test_polynomial_large_degrees_and_limits():
    x = torch.tensor([0.3, -0.7, 1.5, -1.2, 2.0, 0.999])[:, None]
    n = torch.tensor([50.0, 127.0, 128.0, 129.0, 300.0])[None, :]
    for name in ["hermite_polynomial_h", "hermite_polynomial_he", "legendre_polynomial_p", "laguerre_polynomial_l"]:
        fn = getattr(S, name)
        expected = fn(x, n)
        # Up to 300 recurrence steps, each rounding: measured within 2e-5 relative.
        assert_close(fn(x.to(TPU), n.to(TPU)), expected, rtol=2e-5, atol=1e-5)
    # Above 1 the Chebyshev recurrence overflows to inf, then NaN, where the CPU stops too.
    x = torch.tensor([1.5, 3.0, -2.0])[:, None]
    n = torch.tensor([10.0, 100.0, 1000.0, 100000.0])[None, :]
    fn = S.chebyshev_polynomial_u
    assert_close(fn(x.to(TPU), n.to(TPU)), fn(x, n), rtol=2e-5)


def test_polynomial_float64():
    x = torch.linspace(-1.2, 1.2, 50, dtype=torch.float64)[:, None]
    n = torch.tensor(DEGREES, dtype=torch.float64)[None, :]
    for name in POLYNOMIALS:
        fn = getattr(S, name)
        assert_close(fn(x.to(TPU), n.to(TPU)), fn(x, n), rtol=1e-12, atol=1e-12)


def test_degree_is_not_read_by_the_host():
    # One program serves every degree tensor: n stays on the device.
    import torch_tpu

    x = torch.rand(16).to(TPU)
    S.legendre_polynomial_p(x, torch.full((16,), 3.0).to(TPU)).cpu()
    torch_tpu.metrics.reset()
    result = S.legendre_polynomial_p(x, torch.full((16,), 9.0).to(TPU))
    assert torch_tpu.metrics.snapshot()["transfers_to_host"] == 0
    assert_close(result, S.legendre_polynomial_p(x.cpu(), torch.full((16,), 9.0)))
    assert math.isfinite(result.sum().item())
