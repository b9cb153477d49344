"""Special functions (lgamma, digamma, erfinv, i0, sinc, logit, heaviside, nextafter, logaddexp):
forward, backward, dtypes, promotion, in-place/out= variants and edge values against the CPU."""

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTEGERS_AND_BOOL = [torch.int32, torch.int64, torch.bool]
NAN, INF = float("nan"), float("inf")

# f32 tolerances of the chlo expansions and our series, from the largest errors measured against
# the CPU over [-20, 20]: lgamma loses up to 6e-5 absolute next to its negative roots (the
# reflection's cancellation, on either side), digamma 1.5e-5 absolute / 4e-5 relative near its
# poles, erfinv 1e-6 relative; i0 and trigamma are within 5e-7 relative.
F32_TOLERANCE = {
    "lgamma": dict(rtol=1e-5, atol=1e-4),
    "digamma": dict(rtol=5e-5, atol=2e-5),
    "erfinv": dict(rtol=2e-6, atol=3e-6),
}

UNARY = {
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "erfinv": torch.erfinv,
    "i0": torch.special.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "sinc": torch.sinc,
    "logit": torch.logit,
}
# Inputs inside each function's domain (and away from lgamma/digamma poles for low precision).
DOMAIN = {"erfinv": (-0.99, 0.99), "logit": (0.01, 0.99)}


def tolerance(name, dtype):
    return F32_TOLERANCE.get(name, {}) if dtype == torch.float32 else {}


def unary_input(name, shape, dtype):
    low, high = DOMAIN.get(name, (-6.0, 6.0))
    x = make(shape, torch.float32, low, high)
    if name in ("lgamma", "digamma") and dtype != torch.float32:
        x = x.abs() + 0.1  # rounding an input near a pole changes the result by orders
    return x.to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_forward(name, dtype):
    x = unary_input(name, (5, 7), dtype)
    fn = UNARY[name]
    assert_close(fn(x.to(TPU)), fn(x), **tolerance(name, dtype))
    assert_close(fn(noncontiguous(x.to(TPU))), fn(x), **tolerance(name, dtype))


@pytest.mark.parametrize("dtype", INTEGERS_AND_BOOL)
@pytest.mark.parametrize("name", UNARY)
def test_unary_integer_inputs_promote_to_float(name, dtype):
    x = make((9,), dtype, -5, 5)
    assert_close(UNARY[name](x.to(TPU)), UNARY[name](x), **tolerance(name, torch.float32))


# Wide ranges with poles, zeros of both signs, infinities and NaN.
EDGE_VALUES = [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -3.5, -100.0, 1e-30, 1e10, 50.0, 88.0, 91.0, 95.0]
EDGE_VALUES += [INF, -INF, NAN]


@pytest.mark.parametrize("name", ["lgamma", "digamma", "i0", "i0e", "i1", "i1e", "sinc"])
def test_unary_wide_range_and_edges(name):
    x = torch.cat([torch.linspace(-20, 20, 2001), torch.tensor(EDGE_VALUES)])
    fn = UNARY[name]
    assert_close(fn(x.to(TPU)), fn(x), **tolerance(name, torch.float32))


@pytest.mark.parametrize("name", ["lgamma", "digamma", "i0", "i0e", "i1", "i1e", "sinc"])
def test_unary_single_element_and_zero_dim(name):
    # XLA compiles one-element programs differently: a running product in the i0 series once
    # gave NaN there (for 4.5 < |x| <= 12) while longer tensors were right.
    fn = UNARY[name]
    for value in [0.5, 4.7, 8.5, 11.9, 12.5, -9.25]:
        for x in (torch.tensor([value]), torch.tensor(value)):
            assert_close(fn(x.to(TPU)), fn(x), **tolerance(name, torch.float32))


def test_erfinv_edges():
    x = torch.cat([torch.linspace(-1, 1, 2001), torch.tensor([1 - 1e-7, -1 + 1e-7, 2.0, INF, NAN])])
    assert_close(torch.erfinv(x.to(TPU)), torch.erfinv(x), **F32_TOLERANCE["erfinv"])


@pytest.mark.parametrize("eps", [None, 0.0, 1e-3, 0.2])
def test_logit_edges(eps):
    x = torch.cat([torch.linspace(-0.5, 1.5, 201), torch.tensor([0.0, 1.0, NAN])])
    assert_close(torch.logit(x.to(TPU), eps), torch.logit(x, eps))


def test_unary_in_place_out_and_zero_dim():
    x = make((4, 3), low=0.05, high=0.95)
    t = x.to(TPU)
    t.lgamma_()
    assert_close(t, x.lgamma())
    t = x.to(TPU)
    t.logit_(1e-2)
    assert_close(t, x.logit(1e-2))
    out = torch.empty(0, device=TPU)
    torch.special.i0(x.to(TPU), out=out)
    assert_close(out, torch.special.i0(x))
    out = torch.empty(0, device=TPU)
    torch.erfinv(x.to(TPU), out=out)
    assert_close(out, torch.erfinv(x))
    scalar = torch.tensor(0.3)
    for fn in UNARY.values():
        assert_close(fn(scalar.to(TPU)), fn(scalar), **F32_TOLERANCE["lgamma"])


def test_in_place_on_integer_tensor_fails_like_cpu():
    x = make((3,), torch.int64, 1, 5)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        x.clone().lgamma_()
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        x.to(TPU).lgamma_()


@pytest.mark.parametrize("n", [0, 1])
def test_polygamma(n):
    x = torch.cat([torch.linspace(-20, 20, 2001), torch.tensor([0.0, -0.0, -3.0, INF, -INF, NAN])])
    expected = torch.polygamma(n, x)
    assert_close(torch.polygamma(n, x.to(TPU)), expected, rtol=5e-5, atol=2e-5)


def test_polygamma_negative_order_error():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, make((3,)))
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, make((3,)).to(TPU))


# ---- gradients ----


def grad_of(fn, x, device):
    leaf = x.detach().to(device).requires_grad_()
    y = fn(leaf)
    grad_output = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.dtype)
    y.backward(grad_output.to(device))
    return y, leaf.grad


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "name, fn",
    [
        ("lgamma", torch.lgamma),
        ("digamma", torch.digamma),
        ("erfinv", torch.erfinv),
        ("i0", torch.special.i0),
        ("sinc", torch.sinc),
        ("logit", torch.logit),
        ("logit_eps", lambda v: torch.logit(v, 0.1)),
    ],
)
def test_unary_backward(name, fn, dtype):
    base = name.split("_")[0]
    x = unary_input(base, (4, 5), dtype)
    if base == "logit":
        x = torch.cat([x, torch.tensor([[0.0, 1.0, 0.05, 0.95, 1.5]], dtype=dtype)])
    y_cpu, grad_cpu = grad_of(fn, x, "cpu")
    y_tpu, grad_tpu = grad_of(fn, noncontiguous(x.to(TPU)), TPU)
    assert_close(y_tpu, y_cpu.detach(), **tolerance(base, dtype))
    assert_close(grad_tpu, grad_cpu, **tolerance("digamma" if base == "lgamma" else base, dtype))


def test_logit_backward_direct():
    x = torch.tensor([-0.5, 0.0, 0.05, 0.5, 0.95, 1.0, 1.5, NAN])
    grad = make((8,))
    for eps in [-1.0, 0.0, 0.1]:
        expected = torch.ops.aten.logit_backward(grad, x, eps)
        assert_close(torch.ops.aten.logit_backward(grad.to(TPU), x.to(TPU), eps), expected)


# ---- binary ops ----

BINARY = {
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "nextafter": torch.nextafter,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast_noncontiguous(name, dtype):
    a, b = make((4, 6), dtype), make((6,), dtype)
    fn = BINARY[name]
    assert_close(fn(noncontiguous(a.to(TPU)), b.to(TPU)), fn(a, b))
    # Equal operands (nextafter returns y) and the zero crossing.
    assert_close(fn(a.to(TPU), a.to(TPU)), fn(a, a))


@pytest.mark.parametrize("name", BINARY)
def test_binary_edges(name):
    values = torch.tensor([0.0, -0.0, 1.0, -1.0, 1e-38, 3e38, INF, -INF, NAN])
    a, b = torch.meshgrid(values, values, indexing="ij")
    fn = BINARY[name]
    assert_close(fn(a.to(TPU), b.to(TPU)), fn(a, b))


def test_binary_promotion_in_place_out_zero_dim():
    a, b = make((3, 4)), make((3, 4), torch.float64)
    for fn in BINARY.values():
        assert_close(fn(a.to(TPU), b.to(TPU)), fn(a, b), rtol=1e-6, atol=1e-6)
        i = make((3, 4), torch.int32)
        assert_close(fn(a.to(TPU), i.to(TPU)), fn(a, i))
        assert_close(fn(a[0, 0].to(TPU), a[1, 1].to(TPU)), fn(a[0, 0], a[1, 1]))
    t = a.to(TPU)
    t.nextafter_(torch.zeros(4, device=TPU))
    assert_close(t, a.nextafter(torch.zeros(4)))
    out = torch.empty(0, device=TPU)
    torch.logaddexp(a.to(TPU), a.T.contiguous().T.to(TPU), out=out)
    assert_close(out, torch.logaddexp(a, a))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", INTEGERS_AND_BOOL)
def test_binary_integer_error(name, dtype, request):
    if dtype == torch.bool and name != "nextafter":
        # PyTorch's own meta function (a Python reference computing a - b) rejects bool with
        # another message before any tpu code runs: torch.logaddexp(t, t) for t on "meta".
        request.applymarker(pytest.mark.xfail(strict=True, reason="meta raises for bool - bool"))
    a = make((3,), dtype)
    with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented for'):
        BINARY[name](a, a)
    with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented for'):
        BINARY[name](a.to(TPU), a.to(TPU))


@pytest.mark.parametrize("dtype", FLOATS)
def test_logaddexp_backward(dtype):
    a, b = make((3, 4), dtype), make((4,), dtype)
    for fn in (torch.logaddexp, torch.logaddexp2):
        leaves_cpu = [a.clone().requires_grad_(), b.clone().requires_grad_()]
        leaves_tpu = [a.to(TPU).requires_grad_(), b.to(TPU).requires_grad_()]
        fn(*leaves_cpu).sum().backward()
        fn(*leaves_tpu).sum().backward()
        for cpu, tpu in zip(leaves_cpu, leaves_tpu, strict=True):
            assert_close(tpu.grad, cpu.grad)


@pytest.mark.parametrize("dtype", FLOATS + INTEGERS_AND_BOOL)
def test_heaviside(dtype):
    x = make((4, 5), dtype, -2, 3)
    if dtype.is_floating_point:
        x = x.round()  # zeros to pick values
        x[0, 0] = NAN
    values = make((5,), dtype)
    expected = torch.heaviside(x, values)
    assert_close(torch.heaviside(noncontiguous(x.to(TPU)), values.to(TPU)), expected)
    t = x.to(TPU)
    t.heaviside_(values.to(TPU))
    assert_close(t, expected)
    zero_dim = values[0]
    assert_close(torch.heaviside(x.to(TPU), zero_dim.to(TPU)), torch.heaviside(x, zero_dim))


def test_heaviside_mixed_dtypes_error():
    x, values = make((3,)), make((3,), torch.float64)
    message = "heaviside is not yet implemented for tensors with different dtypes"
    with pytest.raises(RuntimeError, match=message):
        torch.heaviside(x, values)
    with pytest.raises(RuntimeError, match=message):
        torch.heaviside(x.to(TPU), values.to(TPU))


def test_broadcast_shape_error():
    a, b = make((3, 4)), make((5,))
    for fn in BINARY.values():
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            fn(a, b)
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            fn(a.to(TPU), b.to(TPU))


@pytest.mark.parametrize("name", UNARY)
def test_unary_float64_and_default_dtype(name):
    x = unary_input(name, (20,), torch.float64)
    fn = UNARY[name]
    assert_close(fn(x.to(TPU)), fn(x), rtol=1e-6, atol=1e-6)
    integers = torch.arange(1, 6)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        # Integer inputs promote to the default dtype and are computed in it.
        assert_close(fn(integers.to(TPU)), fn(integers), rtol=1e-6, atol=1e-6)
    finally:
        torch.set_default_dtype(previous)
