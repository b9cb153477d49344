"""Pooling (max_pool2d with indices, avg_pool2d, adaptive_avg_pool2d) and interpolation
(F.interpolate nearest / bilinear), forward and backward, against PyTorch on the CPU."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def check_forward_backward(fn, x, **tolerance) -> None:
    """fn(x) on tpu and on the CPU: the result (and max_pool's indices) and the gradient of x.

    For bf16/f16 the gradient's reference is the CPU's f32 gradient of the same values, rounded
    once: the CPU's reduced-precision backward kernels add overlapping windows' contributions in
    the reduced type, one rounding per addition, where tpu accumulates in f32 and rounds once.
    """
    cpu_x = x.detach().clone().requires_grad_(True)
    tpu_x = x.detach().to(TPU).requires_grad_(True)
    expected, actual = fn(cpu_x), fn(tpu_x)
    if isinstance(expected, tuple):
        assert_close(actual[1], expected[1])  # indices: exactly the CPU's
        expected, actual = expected[0], actual[0]
    assert_close(actual, expected, **tolerance)
    grad = make(expected.shape, expected.dtype)
    actual.backward(grad.to(TPU))
    if x.dtype in (torch.bfloat16, torch.float16):
        wide_x = x.detach().float().requires_grad_(True)
        wide = fn(wide_x)
        wide = wide[0] if isinstance(wide, tuple) else wide
        wide.backward(grad.float())
        expected_grad = wide_x.grad.to(x.dtype)
    else:
        expected.backward(grad)
        expected_grad = cpu_x.grad
    assert_close(tpu_x.grad, expected_grad, **tolerance)


# ---- max_pool2d ----

# (kernel_size, stride, padding, dilation, ceil_mode)
MAX_POOL_CASES = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 1, True),
    ((3, 2), (2, 3), (1, 1), (2, 1), True),
    ((2, 4), 1, (0, 2), 1, False),  # overlapping windows: gradients add up
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", MAX_POOL_CASES, ids=str)
def test_max_pool2d(case, dtype):
    kernel, stride, padding, dilation, ceil_mode = case
    check_forward_backward(
        lambda x: F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True),
        make((2, 3, 9, 10), dtype),
    )


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int8])
def test_max_pool2d_integers(dtype):
    x = make((2, 3, 7, 8), dtype)
    expected = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    actual = F.max_pool2d(x.to(TPU), 3, 2, 1, return_indices=True)
    assert_close(actual[0], expected[0])
    assert_close(actual[1], expected[1])


def test_max_pool2d_ties_keep_the_first_index():
    x = make((2, 2, 8, 8), low=-2, high=2).round()  # few distinct values: many ties
    check_forward_backward(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), x)


def test_max_pool2d_nan_and_inf():
    x = make((1, 2, 6, 6))
    x[0, 0, 1, 1] = float("nan")
    x[0, 0, 1, 2] = float("nan")
    x[0, 1, :3, :3] = float("-inf")
    x[0, 1, 4, 4] = float("inf")
    check_forward_backward(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)


def test_max_pool2d_unbatched_and_module():
    check_forward_backward(lambda x: F.max_pool2d(x, 2, return_indices=True), make((3, 7, 9)))
    pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
    check_forward_backward(pool, make((2, 4, 11, 6)))


# ---- avg_pool2d ----

# (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_POOL_CASES = [
    (2, None, 0, False, True, None),
    (3, 2, 1, False, True, None),
    (3, 2, 1, True, True, None),
    (3, 2, 1, True, False, None),
    ((2, 3), (3, 2), (1, 0), False, True, 5),
    ((3, 3), 1, 1, False, False, None),  # overlapping windows
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", AVG_POOL_CASES, ids=str)
def test_avg_pool2d(case, dtype):
    kernel, stride, padding, ceil_mode, count_include_pad, divisor = case
    check_forward_backward(
        lambda x: F.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor),
        make((2, 3, 9, 10), dtype),
    )


def test_avg_pool2d_int64_divides_like_the_cpu():
    x = make((2, 3, 7, 8), torch.int64, low=-50, high=50)
    for ceil_mode in (False, True):
        assert_close(F.avg_pool2d(x.to(TPU), 3, 2, 1, ceil_mode), F.avg_pool2d(x, 3, 2, 1, ceil_mode))


def test_avg_pool2d_unbatched_and_module():
    check_forward_backward(lambda x: F.avg_pool2d(x, 3, 2, 1), make((3, 7, 9)))
    check_forward_backward(torch.nn.AvgPool2d(2, ceil_mode=True), make((2, 4, 7, 5)))


# ---- adaptive_avg_pool2d ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("output_size", [(3, 5), (4, 3), (1, 1), (11, 13), (7, None)], ids=str)
def test_adaptive_avg_pool2d(output_size, dtype):
    # 9x10 into 4x3 or 3x5: windows of different widths, overlapping where sizes do not divide.
    check_forward_backward(lambda x: F.adaptive_avg_pool2d(x, output_size), make((2, 3, 9, 10), dtype))


def test_adaptive_avg_pool2d_unbatched_and_nan():
    check_forward_backward(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), make((3, 7, 5)))
    x = make((1, 1, 6, 6))
    x[0, 0, 0, 0] = float("nan")  # stays in its own window
    check_forward_backward(lambda x: F.adaptive_avg_pool2d(x, (4, 4)), x)


# ---- interpolate ----

# (size, scale_factor)
RESIZE_CASES = [(None, 2), (None, 1.7), (None, (0.5, 1.3)), ((5, 23), None), ((9, 10), None), ((4, 7), None)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", RESIZE_CASES, ids=str)
def test_interpolate_nearest(case, dtype):
    size, scale = case
    check_forward_backward(
        lambda x: F.interpolate(x, size=size, scale_factor=scale, mode="nearest"), make((2, 3, 9, 10), dtype)
    )


def test_interpolate_nearest_uint8_and_recomputed_scale():
    x = make((1, 2, 5, 7), torch.uint8, high=255)
    assert_close(F.interpolate(x.to(TPU), scale_factor=1.5), F.interpolate(x, scale_factor=1.5))
    check_forward_backward(
        lambda x: F.interpolate(x, scale_factor=1.7, recompute_scale_factor=True), make((2, 3, 9, 10))
    )


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("case", RESIZE_CASES, ids=str)
def test_interpolate_bilinear(case, align_corners, dtype):
    size, scale = case
    check_forward_backward(
        lambda x: F.interpolate(x, size=size, scale_factor=scale, mode="bilinear", align_corners=align_corners),
        make((2, 3, 9, 10), dtype),
    )


@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_to_one_pixel(align_corners):
    check_forward_backward(
        lambda x: F.interpolate(x, size=(1, 3), mode="bilinear", align_corners=align_corners), make((1, 2, 4, 5))
    )
    check_forward_backward(lambda x: F.interpolate(x, size=(1, 1)), make((1, 2, 4, 5)))


# ---- layouts ----


def test_noncontiguous_inputs():
    x = make((2, 3, 9, 10))
    cases = [
        lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        lambda x: F.avg_pool2d(x, 3, 2, 1),
        lambda x: F.adaptive_avg_pool2d(x, (4, 3)),
        lambda x: F.interpolate(x, scale_factor=1.5),
        lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),
    ]
    for fn in cases:
        expected = fn(noncontiguous(x))
        tpu_x = noncontiguous(x.to(TPU))
        assert not tpu_x.is_contiguous()
        actual = fn(tpu_x)
        if isinstance(expected, tuple):
            assert_close(actual[1], expected[1])
            expected, actual = expected[0], actual[0]
        assert_close(actual, expected)
        check_forward_backward(fn, x.to(memory_format=torch.channels_last))


def test_cnn_training_step():
    torch.manual_seed(2)
    cpu_model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3, padding=1),
        torch.nn.MaxPool2d(2),
        torch.nn.Upsample(scale_factor=2, mode="bilinear"),
        torch.nn.AvgPool2d(3, stride=2, padding=1),
        torch.nn.AdaptiveAvgPool2d((2, 2)),
        torch.nn.Flatten(),
        torch.nn.Linear(24, 5),
    )
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    x = make((2, 3, 9, 9))
    cpu_loss = cpu_model(x).square().mean()
    tpu_loss = tpu_model(x.to(TPU)).square().mean()
    assert_close(tpu_loss, cpu_loss)
    cpu_loss.backward()
    tpu_loss.backward()
    for cpu_p, tpu_p in zip(cpu_model.parameters(), tpu_model.parameters(), strict=False):
        assert_close(tpu_p.grad, cpu_p.grad)


# ---- error paths: the CPU's messages ----

ERROR_CASES = [
    ("max too small", lambda x: F.max_pool2d(x, 9), RuntimeError, "Output size is too small"),
    ("max padding", lambda x: F.max_pool2d(x, 2, padding=2), RuntimeError, "pad should be at most half"),
    ("max stride", lambda x: F.max_pool2d(x, 2, stride=0), RuntimeError, "stride should not be zero"),
    ("avg divisor", lambda x: F.avg_pool2d(x, 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    ("avg padding", lambda x: F.avg_pool2d(x, 2, padding=2), RuntimeError, "pad should be at most half"),
    ("avg rank", lambda x: F.avg_pool2d(x[None], 2), RuntimeError, "Expected 3D or 4D"),
    ("adaptive rank", lambda x: F.adaptive_avg_pool2d(x[0, 0], 2), RuntimeError, "Expected 3D or 4D tensor"),
    ("nearest size", lambda x: F.interpolate(x, size=(0, 3)), RuntimeError, "should be greater than 0"),
    ("bool", lambda x: F.max_pool2d(x > 0, 2), NotImplementedError, "max_pool2d"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c[0])
def test_errors_match_cpu(case):
    _, fn, error, fragment = case
    x = make((2, 3, 8, 8))
    with pytest.raises(error, match=fragment):
        fn(x)
    with pytest.raises(error, match=fragment):
        fn(x.to(TPU))
