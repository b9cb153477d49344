"""F.grid_sample on tpu against the CPU: grid_sampler_2d/3d and their backward ops, every mode,
padding mode and align_corners, grid points outside [-1, 1], batches, non-contiguous inputs,
bf16 and the CPU's errors."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous, raises_like_cpu

import torch_tpu

# Sums over up to 16 taps and the channels, scaled by the size: the CPU's own f32 gradients are
# about this far from the f64 ones.
TOL = dict(rtol=1e-4, atol=5e-5)
PADDINGS = ["zeros", "border", "reflection"]


@pytest.fixture(autouse=True)
def no_cpu_fallback():
    torch_tpu.metrics.reset()
    yield
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def inputs(dims, n=2, c=3, dtype=torch.float32):
    spatial = (5, 6) if dims == 2 else (4, 5, 3)
    out = (4, 3) if dims == 2 else (2, 4, 3)
    x = make((n, c, *spatial), dtype)
    grid = make((n, *out, dims), dtype, low=-1.4, high=1.4)  # some points outside [-1, 1]
    return x, grid


def forward_and_grads(x, grid, grad_out, **kwargs):
    x = x.detach().requires_grad_()
    grid = grid.detach().requires_grad_()
    out = F.grid_sample(x, grid, **kwargs)
    grad_x, grad_grid = torch.autograd.grad(out, (x, grid), grad_out)
    return out, grad_x, grad_grid


def check(x, grid, **kwargs):
    grad_out = make(F.grid_sample(x, grid, **kwargs).shape)
    expected = forward_and_grads(x, grid, grad_out, **kwargs)
    actual = forward_and_grads(x.to(TPU), grid.to(TPU), grad_out.to(TPU), **kwargs)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, **TOL)


# Every 2-D combination; in 3-D (one code path with 2-D, but the scalar kernel's arithmetic)
# trilinear with every padding and nearest with two.
CASES = [
    *itertools.product([2], ["bilinear", "nearest", "bicubic"], PADDINGS, [False, True]),
    *itertools.product([3], ["bilinear"], PADDINGS, [False, True]),
    (3, "nearest", "zeros", False),
    (3, "nearest", "reflection", True),
]


@pytest.mark.parametrize("dims,mode,padding,align_corners", CASES)
def test_forward_and_gradients(dims, mode, padding, align_corners):
    x, grid = inputs(dims)
    check(x, grid, mode=mode, padding_mode=padding, align_corners=align_corners)


def test_noncontiguous_inputs():
    x, grid = inputs(2, n=3)
    check(noncontiguous(x), noncontiguous(grid), mode="bilinear", padding_mode="reflection", align_corners=False)


def test_grid_points_on_pixels_and_far_outside():
    # Exact pixel centres, the borders, half-way points (nearest rounds half to even) and far-away
    # points, where reflection folds many times.
    x = make((1, 2, 4, 5))
    values = torch.tensor([-1.0, -0.5, 0.0, 0.25, 1.0, 1.5, -7.3, 12.6])
    grid = torch.stack(torch.meshgrid(values, values.flip(0), indexing="ij"), -1).unsqueeze(0)
    for mode, padding, align in [
        ("nearest", "zeros", False),
        ("nearest", "border", True),
        ("nearest", "reflection", False),
        ("bilinear", "zeros", True),
        ("bilinear", "reflection", True),
        ("bilinear", "reflection", False),
    ]:
        expected = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
        actual = F.grid_sample(x.to(TPU), grid.to(TPU), mode=mode, padding_mode=padding, align_corners=align)
        assert_close(actual, expected, **TOL)


def test_size_one_axes():
    # Reflection over a single pixel has an empty span (every point maps to it).
    x = make((2, 3, 1, 4, 1))
    grid = make((2, 2, 3, 2, 3), low=-1.5, high=1.5)
    for padding, align in [("border", True), ("reflection", True), ("reflection", False)]:
        check(x, grid, mode="bilinear", padding_mode=padding, align_corners=align)


def test_only_one_gradient():
    x, grid = inputs(2)
    for needs_x in [True, False]:
        cpu = [x.clone().requires_grad_(needs_x), grid.clone().requires_grad_(not needs_x)]
        tpu = [t.detach().to(TPU).requires_grad_(t.requires_grad) for t in cpu]
        results = []
        for a, b in [cpu, tpu]:
            out = F.grid_sample(a, b, mode="bicubic", padding_mode="border", align_corners=True)
            results.append(torch.autograd.grad(out.sum(), a if needs_x else b)[0])
        assert_close(results[1], results[0], **TOL)


@pytest.mark.parametrize("dims,mode", [(2, "bilinear"), (2, "bicubic"), (3, "nearest")])
def test_bfloat16_forward(dims, mode):
    # Compared with the CPU in f32 on the same bf16 values, cast once (never the CPU's bf16 kernel).
    x, grid = inputs(dims, dtype=torch.bfloat16)
    expected = F.grid_sample(x.float(), grid.float(), mode=mode, padding_mode="reflection", align_corners=False)
    actual = F.grid_sample(x.to(TPU), grid.to(TPU), mode=mode, padding_mode="reflection", align_corners=False)
    assert_close(actual, expected.bfloat16())


def test_errors():
    x, grid = inputs(3)
    raises_like_cpu(lambda d: F.grid_sample(x.to(d), grid.to(d), mode="bicubic", align_corners=False))
    raises_like_cpu(lambda d: F.grid_sample(x.to(d), grid.double().to(d), align_corners=False))
