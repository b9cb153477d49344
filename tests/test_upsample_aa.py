"""F.interpolate(mode="bilinear" or "bicubic", antialias=True) on tpu against the CPU:
_upsample_bilinear2d_aa, _upsample_bicubic2d_aa and their backwards, downscaling (where the filter
widens) and upscaling, align_corners, scale factors, non-contiguous inputs and bf16."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

# Each output sums up to a few dozen weighted inputs.
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def no_cpu_fallback():
    torch_tpu.metrics.reset()
    yield
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


MODES = ["bilinear", "bicubic"]


def resize_and_grad(x, grad_out, **kwargs):
    x = x.detach().requires_grad_()
    out = F.interpolate(x, antialias=True, **kwargs)
    return out, torch.autograd.grad(out, x, grad_out)[0]


CASES = [
    dict(size=(5, 7)),  # downscale both axes
    dict(size=(29, 4)),  # upscale one, downscale the other
    dict(size=(3, 11), align_corners=True),
    dict(size=(1, 1), align_corners=True),
    dict(scale_factor=(0.37, 1.7)),
    dict(size=(12, 9)),  # the same size
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kwargs", CASES, ids=str)
def test_forward_and_gradient(kwargs, mode):
    kwargs = dict(kwargs, mode=mode)
    x = make((2, 3, 12, 9))
    grad_out = make(F.interpolate(x, antialias=True, **kwargs).shape)
    expected = resize_and_grad(x, grad_out, **kwargs)
    actual = resize_and_grad(x.to(TPU), grad_out.to(TPU), **kwargs)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, **TOL)


@pytest.mark.parametrize("mode", MODES)
def test_noncontiguous_float64(mode):
    x = noncontiguous(make((1, 2, 10, 13), torch.float64))
    grad_out = make((1, 2, 4, 6), torch.float64)
    expected = resize_and_grad(x, grad_out, size=(4, 6), mode=mode)
    actual = resize_and_grad(x.to(TPU), grad_out.to(TPU), size=(4, 6), mode=mode)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e)


@pytest.mark.parametrize("mode", MODES)
def test_bfloat16_forward(mode):
    # Compared with the CPU in f32 on the same bf16 values, cast once.
    x = make((2, 3, 16, 10), torch.bfloat16)
    expected = F.interpolate(x.float(), size=(6, 7), mode=mode, antialias=True).bfloat16()
    actual = F.interpolate(x.to(TPU), size=(6, 7), mode=mode, antialias=True)
    assert_close(actual, expected)
