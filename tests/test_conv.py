"""Convolutions (conv1d/2d/3d, transposed, grouped, dilated, strided, 'same'), forward and backward
(grad_input, grad_weight, grad_bias), against PyTorch on the CPU, and the precision modes of f32
convolutions."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

from torch_tpu.precision import precision

FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def check_forward_backward(fn, *inputs, **tolerance) -> None:
    """fn(*inputs) on tpu and on the CPU: the result and the gradient of every floating input.
    (The CPU computes half-precision convolutions in float32 and rounds once: conftest.py.)"""
    dtype = next(t.dtype for t in inputs if t is not None)
    cpu_inputs = [t.detach().clone().requires_grad_(True) if t is not None else None for t in inputs]
    tpu_inputs = [t.detach().to(TPU).requires_grad_(True) if t is not None else None for t in inputs]
    expected = fn(*cpu_inputs)
    actual = fn(*tpu_inputs)
    tolerance = tolerance or tolerance_for(dtype)
    assert_close(actual, expected.detach(), **tolerance)
    grad = make(expected.shape, dtype)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    for cpu_input, tpu_input in zip(cpu_inputs, tpu_inputs, strict=True):
        if cpu_input is not None:
            assert_close(tpu_input.grad, cpu_input.grad, **tolerance)


# Convolutions are sums of up to ~300 products (grad_weight sums over batch and positions) of
# inputs up to 3 in magnitude: f32 accumulation in different orders on the two sides differs by
# about sqrt(K) * 2^-24 * sum |products|, up to ~1e-4, more than conftest's elementwise atol. A
# float16 sum whose two f32 accumulations straddle a rounding boundary rounds to either neighbour:
# allow that ulp, 2^-5 for sums up to 64. bf16 uses conftest's tolerance.
def tolerance_for(dtype):
    if dtype == torch.float32:
        return dict(rtol=1.3e-6, atol=1e-4)
    return dict(rtol=1e-3, atol=2.0**-5) if dtype == torch.float16 else {}


F32 = tolerance_for(torch.float32)

# (input shape, weight shape, stride, padding, dilation, groups, bias)
CONV2D_CASES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 0, 1, 1, True),
    ((2, 4, 9, 10), (6, 2, 3, 2), 2, 1, 2, 2, True),  # groups, dilation, stride, odd sizes
    ((1, 6, 11, 7), (6, 1, 3, 3), (3, 2), (2, 1), (1, 2), 6, False),  # depthwise
    ((3, 4, 7, 9), (8, 2, 2, 4), (2, 3), (0, 2), 1, 2, True),  # stride leaves columns unused
    ((2, 3, 5, 5), (2, 3, 1, 1), 1, 0, 1, 1, False),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", CONV2D_CASES, ids=lambda c: f"{c[0]}x{c[1]}")
def test_conv2d(case, dtype):
    x_shape, w_shape, stride, padding, dilation, groups, bias = case
    x, w = make(x_shape, dtype), make(w_shape, dtype)
    b = make((w_shape[0],), dtype) if bias else None
    check_forward_backward(
        lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), x, w, b, **tolerance_for(dtype)
    )


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("dilation", [1, 2])
def test_conv2d_padding_modes(padding, dilation):
    # An even kernel with 'same' pads asymmetrically.
    x, w, b = make((2, 3, 8, 7)), make((4, 3, 4, 3)), make((4,))
    check_forward_backward(lambda x, w, b: F.conv2d(x, w, b, padding=padding, dilation=dilation), x, w, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "case",
    [((2, 3, 11), (4, 3, 3), 3, 1, 1, 1), ((2, 4, 13), (6, 2, 4), 2, 2, 3, 2), ((3, 5), (2, 3, 2), 1, 0, 1, 1)],
    ids=str,
)
def test_conv1d(case, dtype):
    x_shape, w_shape, stride, padding, dilation, groups = case
    x, w, b = make(x_shape, dtype), make(w_shape, dtype), make((w_shape[0],), dtype)
    check_forward_backward(
        lambda x, w, b: F.conv1d(x, w, b, stride, padding, dilation, groups), x, w, b, **tolerance_for(dtype)
    )


def test_conv3d():
    x, w, b = make((2, 4, 5, 6, 5)), make((4, 2, 3, 2, 3)), make((4,))
    check_forward_backward(lambda x, w, b: F.conv3d(x, w, b, (2, 1, 2), (1, 0, 1), (1, 2, 1), 2), x, w, b)


def test_conv2d_unbatched():
    x, w, b = make((3, 8, 9)), make((4, 3, 3, 3)), make((4,))
    check_forward_backward(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b)


# (input shape, weight shape, stride, padding, output_padding, groups, dilation)
CONV_TRANSPOSE2D_CASES = [
    ((2, 3, 5, 6), (3, 4, 3, 3), 2, 1, 1, 1, 1),
    ((2, 6, 5, 4), (6, 2, 3, 2), 3, 2, 1, 3, 2),  # groups, dilation, output_padding
    ((1, 4, 4, 4), (4, 3, 2, 2), (2, 1), 0, 0, 1, 1),
    ((2, 2, 5, 7), (2, 3, 3, 3), 1, 3, 0, 1, 1),  # padding beyond the kernel's reach
    # output_padding >= stride (allowed with dilation): whole extra windows in grad_output
    ((2, 2, 4, 4), (2, 2, 4, 5), (3, 2), (1, 2), (2, 3), 2, (4, 4)),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", CONV_TRANSPOSE2D_CASES, ids=lambda c: f"{c[0]}x{c[1]}")
def test_conv_transpose2d(case, dtype):
    x_shape, w_shape, stride, padding, output_padding, groups, dilation = case
    x, w = make(x_shape, dtype), make(w_shape, dtype)
    b = make((w_shape[1] * groups,), dtype)
    check_forward_backward(
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation),
        x,
        w,
        b,
        **tolerance_for(dtype),
    )


def test_conv_transpose1d():
    x, w, b = make((2, 4, 7)), make((4, 3, 3)), make((6,))
    check_forward_backward(lambda x, w, b: F.conv_transpose1d(x, w, b, 2, 1, 1, 2), x, w, b)


def test_noncontiguous_inputs():
    x, w, b = make((2, 3, 7, 8)), make((4, 3, 3, 3)), make((4,))
    cpu_x, cpu_w = noncontiguous(x), noncontiguous(w)
    tpu_x, tpu_w = noncontiguous(x.to(TPU)), noncontiguous(w.to(TPU))
    assert not tpu_x.is_contiguous() and not tpu_w.is_contiguous()
    for t in (cpu_x, cpu_w, tpu_x, tpu_w):
        t.requires_grad_(True)
    expected = F.conv2d(cpu_x, cpu_w, b, stride=2, padding=1)
    actual = F.conv2d(tpu_x, tpu_w, b.to(TPU), stride=2, padding=1)
    assert_close(actual, expected, **F32)
    grad = make(expected.shape)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(tpu_x.grad, cpu_x.grad, **F32)
    assert_close(tpu_w.grad, cpu_w.grad, **F32)
    # A channels_last input.
    check_forward_backward(lambda x, w: F.conv2d(x, w, padding=1), x.to(memory_format=torch.channels_last), w)


@pytest.mark.parametrize("transposed", [False, True])
def test_module_parameter_grads(transposed):
    torch.manual_seed(0)
    if transposed:
        cpu_module = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    else:
        cpu_module = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    tpu_module = copy.deepcopy(cpu_module).to(TPU)
    x = make((2, 4, 9, 9))
    expected = cpu_module(x)
    actual = tpu_module(x.to(TPU))  # the input needs no gradient: only weight and bias
    assert_close(actual, expected, **F32)
    grad = make(expected.shape)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(tpu_module.weight.grad, cpu_module.weight.grad, **F32)
    assert_close(tpu_module.bias.grad, cpu_module.bias.grad, **F32)


def test_input_grad_only():
    x, w = make((2, 3, 8, 8)), make((4, 3, 3, 3))
    cpu_x = x.clone().requires_grad_(True)
    tpu_x = x.to(TPU).requires_grad_(True)
    expected = F.conv2d(cpu_x, w, stride=2)
    actual = F.conv2d(tpu_x, w.to(TPU), stride=2)
    grad = make(expected.shape)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(tpu_x.grad, cpu_x.grad, **F32)


def test_training_step():
    torch.manual_seed(1)
    cpu_model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, stride=2)
    )
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    x = make((2, 3, 10, 10))
    for model, device in ((cpu_model, "cpu"), (tpu_model, TPU)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(x.to(device)).square().mean()
        loss.backward()
        optimizer.step()
    for cpu_p, tpu_p in zip(cpu_model.parameters(), tpu_model.parameters(), strict=True):
        assert_close(tpu_p.grad, cpu_p.grad, **F32)
        assert_close(tpu_p.detach(), cpu_p.detach(), **F32)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_integer_conv2d_wraps_like_the_cpu(dtype):
    x = make((2, 4, 7, 8), dtype, low=-100, high=100)
    w = make((6, 2, 3, 2), dtype, low=-100, high=100)
    b = make((6,), dtype)
    expected = F.conv2d(x, w, b, stride=2, padding=1, groups=2)
    assert_close(F.conv2d(x.to(TPU), w.to(TPU), b.to(TPU), stride=2, padding=1, groups=2), expected)


def test_bool_is_not_implemented():
    x, w = make((1, 2, 4, 4), torch.bool), make((2, 2, 2, 2), torch.bool)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        F.conv2d(x, w)
    with pytest.raises(NotImplementedError, match="bool"):
        F.conv2d(x.to(TPU), w.to(TPU))


def test_float64():
    x, w, b = make((2, 3, 6, 6), torch.float64), make((4, 3, 3, 3), torch.float64), make((4,), torch.float64)
    check_forward_backward(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), x, w, b, rtol=1e-12, atol=1e-12)


# ---- precision modes ----


@pytest.fixture
def matmul_precision():
    saved = torch.get_float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    torch.set_float32_matmul_precision(saved)


def test_default_precision_rounds_operands_to_bf16(matmul_precision):
    matmul_precision("medium")
    assert precision().name == "DEFAULT"
    x, w = make((2, 8, 9, 9)), make((6, 8, 3, 3))
    rounded = F.conv2d(x.bfloat16().double(), w.bfloat16().double(), padding=1)
    actual = F.conv2d(x.to(TPU), w.to(TPU), padding=1).cpu().double()
    scale = F.conv2d(x.double().abs(), w.double().abs(), padding=1)
    # Exactly the product of the bf16-rounded operands, up to f32 accumulation...
    assert ((actual - rounded).abs() <= 1e-6 * scale + 1e-6).all()
    # ...which is measurably not the f32 convolution.
    assert (actual - F.conv2d(x.double(), w.double(), padding=1)).abs().max() > 1e-3


def conv_and_grads(x, w, b, grad):
    """conv2d(x, w, b) in float64 on the CPU, with the gradients of x and w for ``grad``."""
    x, w = x.double().requires_grad_(True), w.double().requires_grad_(True)
    y = F.conv2d(x, w, b.double(), padding=1)
    y.backward(grad.double())
    return y.detach(), x.grad, w.grad


# Error bounds relative to the same sums over absolute values (which cancellation cannot shrink),
# the matmul bounds of test_linalg.py: DEFAULT rounds operands to bf16 (2^-7 per product), HIGH
# keeps them to 2^-16 (below 2^-14 in all), HIGHEST is f32. Measured on this problem: DEFAULT
# ~2e-3, HIGH ~4e-6, HIGHEST ~2e-7, so each mode also misses the next mode's bound.
CONV_BOUNDS = {"medium": 2.0**-7 * 1.01, "high": 2.0**-14, "highest": 6e-7}
TIGHTER = {"medium": "high", "high": "highest"}


@pytest.mark.parametrize("mode", ["medium", "high", "highest"])
def test_precision_mode_error_bands(matmul_precision, mode):
    # The forward and both gradients (all convolutions) lie in the mode's band.
    matmul_precision(mode)
    x, w, b = make((2, 8, 9, 9)), make((6, 8, 3, 3)), make((6,))
    tpu_x, tpu_w = x.to(TPU).requires_grad_(True), w.to(TPU).requires_grad_(True)
    actual = F.conv2d(tpu_x, tpu_w, b.to(TPU), padding=1)
    grad = make(actual.shape)
    actual.backward(grad.to(TPU))
    exact = conv_and_grads(x, w, b, grad)
    scale = conv_and_grads(x.abs(), w.abs(), b.abs(), grad.abs())
    for got, expected, size in zip((actual.detach(), tpu_x.grad, tpu_w.grad), exact, scale, strict=True):
        relative = ((got.cpu().double() - expected).abs() / (size + 1e-30)).max().item()
        assert relative <= CONV_BOUNDS[mode]
        if mode in TIGHTER:
            assert relative > CONV_BOUNDS[TIGHTER[mode]], "a lower mode computed more precisely than it should"


# ---- error paths: the CPU's messages ----

ERROR_CASES = [
    ("channels", lambda x: F.conv2d(x, x.new_ones(4, 4, 3, 3)), "to have 4 channels, but got 3 channels instead"),
    ("kernel", lambda x: F.conv2d(x, x.new_ones(4, 3, 9, 3)), "Kernel size can't be greater than actual input size"),
    (
        "bias",
        lambda x: F.conv2d(x, x.new_ones(4, 3, 3, 3), x.new_ones(5)),
        "expected bias to be 1-dimensional with 4 elements",
    ),
    ("groups", lambda x: F.conv2d(x, x.new_ones(5, 3, 3, 3), groups=3), "to be divisible by 3 at dimension 0"),
    ("rank", lambda x: F.conv2d(x[None, None], x.new_ones(4, 3, 3, 3)), "Expected 3D (unbatched) or 4D (batched)"),
    ("stride", lambda x: F.conv2d(x, x.new_ones(4, 3, 3, 3), stride=0), "non-positive stride is not supported"),
    ("padding", lambda x: F.conv2d(x, x.new_ones(4, 3, 3, 3), padding=-1), "negative padding is not supported"),
    (
        "transposed",
        lambda x: F.conv_transpose2d(x, x.new_ones(4, 3, 3, 3)),
        "expected input[2, 3, 8, 8] to have 4 channels",
    ),
    ("dtype", lambda x: F.conv2d(x, x.new_ones(4, 3, 3, 3).double()), "should be the same"),
    (
        "bias dtype",
        lambda x: F.conv_transpose2d(x, x.new_ones(3, 4, 3, 3), x.new_ones(4).double()),
        "should be the same",
    ),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c[0])
def test_errors_match_cpu(case):
    _, fn, fragment = case
    x = make((2, 3, 8, 8))
    with pytest.raises(RuntimeError, match=None) as cpu_error:
        fn(x)
    with pytest.raises(type(cpu_error.value)) as tpu_error:
        fn(x.to(TPU))
    assert fragment in str(cpu_error.value)
    assert fragment in str(tpu_error.value)
