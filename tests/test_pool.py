"""Pooling (max / avg / adaptive avg / adaptive max, 1-D to 3-D) and interpolation
(F.interpolate nearest, nearest-exact, linear, bilinear, trilinear, bicubic), forward and
backward, against PyTorch on the CPU."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


REDUCED = (torch.bfloat16, torch.float16)


def check_forward_backward(fn, x, float_reference=False, **tolerance) -> None:
    """fn(x) on tpu and on the CPU: the result (and max_pool's indices) and the gradient of x.

    For bf16/f16 the gradient's reference is the CPU's f32 gradient of the same values, rounded
    once: the CPU's reduced-precision backward kernels add overlapping windows' contributions in
    the reduced type, one rounding per addition, where tpu accumulates in f32 and rounds once.
    `float_reference` does the same for the forward result, for ops the CPU lacks in bf16/f16.
    """
    cpu_x = x.detach().clone().requires_grad_(True)
    tpu_x = x.detach().to(TPU).requires_grad_(True)
    if float_reference and x.dtype in REDUCED:
        expected = fn(cpu_x.float()).to(x.dtype)
    else:
        expected = fn(cpu_x)
    actual = fn(tpu_x)
    if isinstance(expected, tuple):
        assert_close(actual[1], expected[1])  # indices: exactly the CPU's
        expected, actual = expected[0], actual[0]
    assert_close(actual, expected, **tolerance)
    grad = make(expected.shape, expected.dtype)
    actual.backward(grad.to(TPU))
    if x.dtype in REDUCED:
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


# ---- 1-D pooling (decomposes into the 2-D ops) ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pool1d(dtype):
    x = make((2, 3, 17), dtype)
    check_forward_backward(lambda x: F.max_pool1d(x, 3, 2, 1, 2, True, return_indices=True), x)
    check_forward_backward(lambda x: F.max_pool1d(x, 4), x)
    check_forward_backward(lambda x: F.avg_pool1d(x, 3, 2, 1, True, False), x)
    check_forward_backward(lambda x: F.adaptive_avg_pool1d(x, 5), x)
    check_forward_backward(lambda x: F.adaptive_max_pool1d(x, 5, return_indices=True), x)


# ---- 3-D pooling ----

MAX_POOL3D_CASES = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, True),
    ((3, 2, 2), (2, 1, 3), (1, 0, 1), (1, 2, 1), True),
    ((2, 3, 2), 1, (1, 1, 0), 1, False),  # overlapping windows: gradients add up
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", MAX_POOL3D_CASES, ids=str)
def test_max_pool3d(case, dtype):
    kernel, stride, padding, dilation, ceil_mode = case
    check_forward_backward(
        lambda x: F.max_pool3d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True),
        make((2, 2, 6, 7, 5), dtype),
    )


def test_pool3d_integers():
    x = make((2, 3, 5, 7, 6), torch.int64, low=-50, high=50)
    for dtype in (torch.int32, torch.int64, torch.uint8):
        expected = F.max_pool3d(x.to(dtype), 3, 2, 1, return_indices=True)
        actual = F.max_pool3d(x.to(dtype).to(TPU), 3, 2, 1, return_indices=True)
        assert_close(actual[0], expected[0])
        assert_close(actual[1], expected[1])
    for ceil_mode in (False, True):
        assert_close(F.avg_pool3d(x.to(TPU), 3, 2, 1, ceil_mode), F.avg_pool3d(x, 3, 2, 1, ceil_mode))


def test_max_pool3d_ties_nan_and_unbatched():
    x = make((1, 2, 5, 6, 6), low=-2, high=2).round()  # many ties
    x[0, 0, 1, 1, 1] = float("nan")
    x[0, 0, 1, 1, 2] = float("nan")
    x[0, 1, 2:, 2:, 2:] = float("-inf")
    check_forward_backward(lambda x: F.max_pool3d(x, 3, 1, 1, return_indices=True), x)
    check_forward_backward(torch.nn.MaxPool3d(2, ceil_mode=True), make((2, 5, 7, 3)))


AVG_POOL3D_CASES = [
    (2, None, 0, False, True, None),
    (3, 2, 1, True, True, None),
    (3, 2, 1, True, False, None),
    ((2, 3, 2), (1, 2, 3), (1, 1, 0), False, True, 7),
    (3, 1, 1, False, False, None),  # overlapping windows
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", AVG_POOL3D_CASES, ids=str)
def test_avg_pool3d(case, dtype):
    kernel, stride, padding, ceil_mode, count_include_pad, divisor = case
    check_forward_backward(
        lambda x: F.avg_pool3d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor),
        make((2, 2, 6, 7, 5), dtype),
        float_reference=True,  # the CPU has no bf16/f16 avg_pool3d
    )


def test_avg_pool3d_unbatched_and_module():
    check_forward_backward(lambda x: F.avg_pool3d(x, 3, 2, 1), make((3, 5, 7, 6)))
    check_forward_backward(torch.nn.AvgPool3d(2, ceil_mode=True), make((2, 4, 5, 3, 5)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("output_size", [(3, 2, 4), (1, 1, 1), (7, 9, 6), (2, None, 3)], ids=str)
def test_adaptive_avg_pool3d(output_size, dtype):
    check_forward_backward(lambda x: F.adaptive_avg_pool3d(x, output_size), make((2, 2, 5, 7, 4), dtype))


def test_adaptive_avg_pool3d_unbatched():
    check_forward_backward(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), make((3, 5, 4, 5)))


# ---- adaptive_max_pool ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("output_size", [(3, 5), (4, 3), (1, 1), (11, 13), (7, None)], ids=str)
def test_adaptive_max_pool2d(output_size, dtype):
    check_forward_backward(
        lambda x: F.adaptive_max_pool2d(x, output_size, return_indices=True), make((2, 3, 9, 10), dtype)
    )


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("output_size", [(3, 2, 4), (1, 1, 1), (6, 8, 5)], ids=str)
def test_adaptive_max_pool3d(output_size, dtype):
    check_forward_backward(
        lambda x: F.adaptive_max_pool3d(x, output_size, return_indices=True), make((2, 2, 5, 7, 4), dtype)
    )


def test_adaptive_max_pool_ties_nan_and_unbatched():
    x = make((2, 2, 8, 7), low=-2, high=2).round()  # many ties, overlapping windows
    x[0, 0, 1, 1] = float("nan")
    x[0, 0, 2, 2] = float("nan")
    x[1, 1, :4, :4] = float("-inf")
    check_forward_backward(lambda x: F.adaptive_max_pool2d(x, (5, 4), return_indices=True), x)
    check_forward_backward(lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True), make((3, 7, 5)))
    check_forward_backward(lambda x: F.adaptive_max_pool3d(x, 2, return_indices=True), make((3, 5, 4, 5)))


# ---- interpolation, 1-D to 3-D ----

# (mode, input shape, size, scale_factor)
INTERPOLATE_CASES = [
    ("nearest", (2, 3, 9), None, 2),
    ("nearest", (2, 3, 9), (13,), None),
    ("nearest", (1, 2, 4, 5, 6), None, (1.5, 2, 0.7)),
    ("nearest", (1, 2, 4, 5, 6), (4, 7, 3), None),
    ("nearest-exact", (2, 3, 9), None, 1.7),
    ("nearest-exact", (2, 3, 9, 10), (5, 23), None),
    ("nearest-exact", (2, 3, 9, 10), None, (0.5, 1.3)),
    ("nearest-exact", (1, 2, 4, 5, 6), None, (1.5, 2, 0.7)),
    ("linear", (2, 3, 9), None, 2),
    ("linear", (2, 3, 9), None, 0.6),
    ("linear", (2, 3, 9), (25,), None),
    ("trilinear", (1, 2, 4, 5, 6), None, (1.5, 2, 0.7)),
    ("trilinear", (1, 2, 4, 5, 6), (4, 9, 3), None),
    ("bicubic", (2, 3, 9, 10), None, 2),
    ("bicubic", (2, 3, 9, 10), None, (0.5, 1.3)),
    ("bicubic", (2, 3, 9, 10), (5, 23), None),
    ("bicubic", (2, 3, 4, 5), (1, 11), None),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", INTERPOLATE_CASES, ids=str)
def test_interpolate_modes(case, dtype):
    mode, shape, size, scale = case
    corners = [False, True] if mode in ("linear", "trilinear", "bicubic") else [None]
    for align_corners in corners:
        check_forward_backward(
            lambda x, ac=align_corners: F.interpolate(x, size, scale, mode=mode, align_corners=ac),
            make(shape, dtype),
            # The CPU's bf16/f16 trilinear rounds partial sums (errors of several ulp where tpu,
            # accumulating in f32, rounds once): compare with its f32 result instead.
            float_reference=mode == "trilinear",
        )


def test_interpolate_nearest_integers_and_nan():
    for shape, mode in [((1, 2, 7), "nearest"), ((1, 2, 3, 4, 5), "nearest"), ((1, 2, 5, 7), "nearest-exact")]:
        x = make(shape, torch.uint8, high=255)
        assert_close(
            F.interpolate(x.to(TPU), scale_factor=1.5, mode=mode), F.interpolate(x, scale_factor=1.5, mode=mode)
        )
    x = make((1, 2, 6))
    x[0, 0, 2] = float("nan")
    x[0, 1, 3] = float("inf")
    for mode in ("nearest", "linear"):
        check_forward_backward(lambda x, m=mode: F.interpolate(x, scale_factor=1.5, mode=m), x)


# ---- local_response_norm (avg_pool2d for 3-D inputs, avg_pool3d above) ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 7, 4, 5), (1, 6, 3, 4, 2)], ids=str)
def test_local_response_norm(shape, dtype):
    # For 4-D and 5-D inputs the CPU lacks bf16/f16 (avg_pool3d): the reference is the f32 result,
    # rounded once, while tpu runs local_response_norm's composite (square, pool, scale, pow,
    # divide; about twice as many ops in the backward) in f16, one rounding per op. Its f16
    # gradients then differ by up to about 1.5 ulps (1.45e-3 relative beyond atol, worst of 600
    # random cases), past conftest's one-ulp rtol: allow 4 ulps.
    reference = len(shape) > 3
    tolerance = dict(rtol=4 * 2.0**-10, atol=1e-3) if reference and dtype == torch.float16 else {}
    lrn = lambda x: F.local_response_norm(x, 3, alpha=0.1, beta=0.75, k=1.5)  # noqa: E731
    check_forward_backward(lrn, make(shape, dtype), float_reference=reference, **tolerance)
    check_forward_backward(torch.nn.LocalResponseNorm(4), make(shape, dtype), float_reference=reference, **tolerance)


# ---- layouts ----


NONCONTIGUOUS_CASES_2D = [
    lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
    lambda x: F.avg_pool2d(x, 3, 2, 1),
    lambda x: F.adaptive_avg_pool2d(x, (4, 3)),
    lambda x: F.interpolate(x, scale_factor=1.5),
    lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),
]
NONCONTIGUOUS_CASES_3D = [
    lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True),
    lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
    lambda x: F.adaptive_avg_pool3d(x, (4, 3, 2)),
    lambda x: F.adaptive_max_pool3d(x, (4, 3, 2), return_indices=True),
    lambda x: F.interpolate(x, scale_factor=1.5),
    lambda x: F.interpolate(x, scale_factor=1.5, mode="trilinear"),
    lambda x: F.interpolate(x[:, :, 0], scale_factor=1.5, mode="bicubic"),
    lambda x: F.adaptive_max_pool2d(x[:, :, 0], (4, 3), return_indices=True),
    lambda x: F.interpolate(x[:, :, 0, 0], scale_factor=1.5, mode="linear"),
]


@pytest.mark.parametrize(
    "shape, memory_format, cases",
    [
        ((2, 3, 9, 10), torch.channels_last, NONCONTIGUOUS_CASES_2D),
        ((2, 3, 6, 7, 5), torch.channels_last_3d, NONCONTIGUOUS_CASES_3D),
    ],
    ids=["2d", "3d"],
)
def test_noncontiguous_and_channels_last(shape, memory_format, cases):
    x = make(shape)
    for fn in cases:
        expected = fn(noncontiguous(x))
        tpu_x = noncontiguous(x.to(TPU))
        assert not tpu_x.is_contiguous()
        actual = fn(tpu_x)
        if isinstance(expected, tuple):
            assert_close(actual[1], expected[1])
            expected, actual = expected[0], actual[0]
        assert_close(actual, expected)
        check_forward_backward(fn, x.to(memory_format=memory_format))


def test_out_variants():
    x = make((2, 3, 6, 7, 5))
    calls = [
        lambda x, **out: torch._C._nn.avg_pool3d(x, 2, **out),
        lambda x, **out: torch._C._nn.upsample_nearest3d(x, [7, 9, 4], **out),
        lambda x, **out: torch._C._nn.upsample_trilinear3d(x, [7, 9, 4], True, **out),
        lambda x, **out: torch._C._nn.upsample_bicubic2d(x[:, 0], [7, 9], False, **out),
        lambda x, **out: torch._C._nn.upsample_linear1d(x[:, 0, 0], [11], False, **out),
    ]
    for call in calls:
        expected = call(x)
        out = torch.empty(0, device=TPU)
        result = call(x.to(TPU), out=out)
        assert result is out
        assert_close(out, expected)
    values, indices = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int64, device=TPU)
    torch._C._nn.adaptive_max_pool2d(x[:, 0].to(TPU), [4, 3], out=(values, indices))
    expected = F.adaptive_max_pool2d(x[:, 0], (4, 3), return_indices=True)
    assert_close(values, expected[0])
    assert_close(indices, expected[1])


def check_training_step(seed, layers, input_shape):
    """One loss and backward of a small CNN: the loss and every parameter's gradient match."""
    torch.manual_seed(seed)
    cpu_model = torch.nn.Sequential(*layers())
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    x = make(input_shape)
    cpu_loss = cpu_model(x).square().mean()
    tpu_loss = tpu_model(x.to(TPU)).square().mean()
    assert_close(tpu_loss, cpu_loss)
    cpu_loss.backward()
    tpu_loss.backward()
    for cpu_p, tpu_p in zip(cpu_model.parameters(), tpu_model.parameters(), strict=True):
        assert_close(tpu_p.grad, cpu_p.grad)


def test_cnn3d_training_step():
    layers = lambda: [  # noqa: E731
        torch.nn.Conv3d(2, 4, 3, padding=1),
        torch.nn.MaxPool3d(2),
        torch.nn.Upsample(scale_factor=2, mode="trilinear"),
        torch.nn.AvgPool3d(3, stride=2, padding=1),
        torch.nn.AdaptiveMaxPool3d((2, 2, 1)),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 5),
    ]
    check_training_step(3, layers, (2, 2, 6, 6, 4))


def test_cnn_training_step():
    layers = lambda: [  # noqa: E731
        torch.nn.Conv2d(3, 6, 3, padding=1),
        torch.nn.MaxPool2d(2),
        torch.nn.Upsample(scale_factor=2, mode="bilinear"),
        torch.nn.AvgPool2d(3, stride=2, padding=1),
        torch.nn.AdaptiveAvgPool2d((2, 2)),
        torch.nn.Flatten(),
        torch.nn.Linear(24, 5),
    ]
    check_training_step(2, layers, (2, 3, 9, 9))


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
    ("max3d too small", lambda x: F.max_pool3d(x, (1, 9, 9)), RuntimeError, "Output size is too small"),
    ("max3d padding", lambda x: F.max_pool3d(x[None], 2, padding=2), RuntimeError, "pad should be"),
    ("max3d rank", lambda x: F.max_pool3d(x[0, 0], 2), RuntimeError, "non-empty 4D or 5D"),
    ("avg3d divisor", lambda x: F.avg_pool3d(x, 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    ("avg3d padding", lambda x: F.avg_pool3d(x, 2, padding=2), RuntimeError, "pad should be"),
    ("adaptive3d rank", lambda x: F.adaptive_avg_pool3d(x[0, 0], 2), RuntimeError, "4D or 5D"),
    ("adaptive max rank", lambda x: F.adaptive_max_pool2d(x[0, 0], 2), RuntimeError, "3D or 4D"),
    ("adaptive max3d rank", lambda x: F.adaptive_max_pool3d(x[0, 0], 2), RuntimeError, "4D or 5D"),
    ("linear size", lambda x: F.interpolate(x[0], size=0, mode="linear"), RuntimeError, "should be greater than 0"),
    ("bicubic bool", lambda x: F.interpolate(x > 0, size=3, mode="bicubic"), NotImplementedError, "'Bool'"),
    ("nearest3d bool", lambda x: F.interpolate(x[None] > 0, size=3), NotImplementedError, "'Bool'"),
    ("adaptive max int", lambda x: F.adaptive_max_pool2d(x.int(), 2), NotImplementedError, "for 'Int'"),
    ("bilinear int", lambda x: F.interpolate(x.long(), size=3, mode="bilinear"), NotImplementedError, "'Long'"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c[0])
def test_errors_match_cpu(case):
    _, fn, error, fragment = case
    x = make((2, 3, 8, 8))
    with pytest.raises(error, match=fragment):
        fn(x)
    with pytest.raises(error, match=fragment):
        fn(x.to(TPU))


# ---- max_unpool2d / max_unpool3d ----


def no_fallbacks(fn):
    torch_tpu.metrics.reset()
    fn()
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def check_unpool(unpool, pooled, indices, **tolerance):
    """unpool(values, indices) on tpu and on the CPU, forward and the gradient of the values."""
    cpu_x = pooled.detach().clone().requires_grad_(True)
    tpu_x = pooled.detach().to(TPU).requires_grad_(True)
    expected = unpool(cpu_x, indices)
    actual = unpool(tpu_x, indices.to(TPU))
    assert_close(actual, expected, **tolerance)
    grad = make(expected.shape, expected.dtype)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(tpu_x.grad, cpu_x.grad, **tolerance)


# (shape, kernel, stride, padding, output_size)
UNPOOL2D_CASES = [
    ((2, 3, 8, 8), 2, None, 0, None),
    ((2, 3, 9, 7), 3, 2, 1, None),
    ((3, 9, 10), (2, 3), (2, 2), 0, (9, 10)),  # unbatched, output_size past the default
    ((1, 2, 7, 7), 2, 2, 0, (7, 7)),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", UNPOOL2D_CASES, ids=str)
def test_max_unpool2d(case, dtype):
    shape, kernel, stride, padding, output_size = case
    values, indices = F.max_pool2d(make(shape, dtype), kernel, stride, padding, return_indices=True)

    def unpool(v, i):
        return F.max_unpool2d(v, i, kernel, stride, padding, output_size)

    no_fallbacks(lambda: check_unpool(unpool, values, indices))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_max_unpool3d(dtype):
    values, indices = F.max_pool3d(make((2, 2, 6, 5, 7), dtype), 2, return_indices=True)
    no_fallbacks(lambda: check_unpool(lambda v, i: F.max_unpool3d(v, i, 2, output_size=(6, 5, 7)), values, indices))
    values, indices = F.max_pool3d(make((2, 4, 4, 4), dtype), 2, return_indices=True)
    check_unpool(lambda v, i: F.max_unpool3d(v, i, 2), values, indices)
    values, indices = F.max_pool3d(make((2, 7, 6, 5), dtype), 3, 2, 1, return_indices=True)  # unbatched
    check_unpool(lambda v, i: F.max_unpool3d(v, i, 3, 2, 1, output_size=(7, 6, 5)), values, indices)


def test_max_unpool_modules_noncontiguous_and_empty_batch():
    pool, unpool = torch.nn.MaxPool2d(2, return_indices=True), torch.nn.MaxUnpool2d(2)
    values, indices = pool(make((2, 3, 6, 8)))
    check_unpool(lambda v, i: unpool(noncontiguous(v), i), values, indices)
    values, indices = torch.nn.MaxPool3d(2, return_indices=True)(make((1, 2, 4, 4, 4)))
    check_unpool(torch.nn.MaxUnpool3d(2), values, indices)
    empty = torch.zeros(0, 2, 3, 3)
    check_unpool(lambda v, i: F.max_unpool2d(v, i, 2), empty, empty.long())


def test_max_unpool_repeated_indices_keep_the_last_write():
    # Every element of a plane names one of two positions: the CPU's loop leaves the last one.
    values = make((2, 3, 4, 4))
    indices = torch.randint(0, 2, (2, 3, 4, 4)) * 5
    assert_close(F.max_unpool2d(values.to(TPU), indices.to(TPU), 2), F.max_unpool2d(values, indices, 2))
    values = make((1, 2, 2, 3, 3))
    indices = torch.randint(0, 3, (1, 2, 2, 3, 3))
    assert_close(F.max_unpool3d(values.to(TPU), indices.to(TPU), 2), F.max_unpool3d(values, indices, 2))


def test_max_unpool_out_of_range_indices_raise_the_cpu_error_at_the_next_read():
    # One bad index: the CPU runs the planes in parallel, so which of several it names varies.
    values = make((1, 2, 2, 2))
    indices = torch.tensor([[[[0, 5], [16, 15]], [[1, 3], [2, 4]]]])
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: 16 \(output volumes are of size 4x4\)"):
        F.max_unpool2d(values, indices, 2)
    # As CUDA's device-side assert: the op records; the read of its result raises the CPU's error
    # (test_device_checks.py covers the modes and 3d).
    result = F.max_unpool2d(values.to(TPU), indices.to(TPU), 2)
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: 16 \(output volumes are of size 4x4\)"):
        result.cpu()


def test_max_unpool_errors():
    x = make((1, 2, 3, 3)).to(TPU)
    indices = torch.zeros(1, 2, 3, 3, dtype=torch.long, device=TPU)
    with pytest.raises(RuntimeError, match="Input to max_unpooling2d should be a 3d or 4d Tensor"):
        F.max_unpool2d(x[0, 0], indices[0, 0], 2)
    with pytest.raises(RuntimeError, match="Input to max_unpooling3d should be a 4d or 5d Tensor"):
        F.max_unpool3d(x[0], indices[0], 2)
    with pytest.raises(RuntimeError, match="Expected shape of indices to be same as that of the input tensor"):
        F.max_unpool2d(x, indices[..., :2], 2)
    with pytest.raises(RuntimeError, match="elements in indices should be type int64 but got"):
        F.max_unpool2d(x, indices.int(), 2)
    with pytest.raises(RuntimeError, match="There should be exactly two elements"):
        torch.ops.aten.max_unpool2d(x, indices, [6])
    with pytest.raises(RuntimeError, match=r"strides should be greater than zero, but got stride: \[0, 2, 2\]"):
        torch.ops.aten.max_unpool3d(x, indices, [6, 6, 6], [0, 2, 2], [0, 0, 0])
    for dims, unpool in [(2, F.max_unpool2d), (3, F.max_unpool3d)]:
        integers = torch.ones((1,) * (dims + 2), dtype=torch.long, device=TPU)
        with pytest.raises(NotImplementedError, match=f"\"max_unpool{dims}d\" not implemented for 'Long'"):
            unpool(integers, torch.zeros_like(integers), 2)
