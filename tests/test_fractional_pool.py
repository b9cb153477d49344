"""F.fractional_max_pool2d / fractional_max_pool3d, forward and backward, against PyTorch on the
CPU. Explicit `_random_samples` give both sides the same windows; without them the samples come
from tpu's generator."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous, raises_like_cpu

pytestmark = pytest.mark.usefixtures("no_cpu_fallback")

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
REDUCED = (torch.bfloat16, torch.float16)
POOLS = {2: F.fractional_max_pool2d, 3: F.fractional_max_pool3d}
BACKWARD = {
    2: torch.ops.aten.fractional_max_pool2d_backward,
    3: torch.ops.aten.fractional_max_pool3d_backward,
}


def native_cpu(fn, *args, **kwargs):
    """`fn` on the CPU outside conftest's Float32Reference. The forward kernel places its windows
    with arithmetic in the input's dtype (c10's BFloat16 and Half round every step) and then only
    compares values, so it is exact and the same on every processor; rerun in float32 it would
    place other windows."""
    with torch.utils._python_dispatch._disable_current_modes():
        return fn(*args, **kwargs)


def samples_for(x: torch.Tensor, dims: int, seed: int = 0, rows: int | None = None) -> torch.Tensor:
    batch = x.shape[0] if x.dim() == dims + 2 else 1
    generator = torch.Generator().manual_seed(seed)
    shape = (batch if rows is None else rows, x.shape[-dims - 1], dims)
    return torch.rand(shape, generator=generator, dtype=torch.float64).to(x.dtype)


def check_forward(dims: int, x: torch.Tensor, kernel, samples: torch.Tensor, tpu_x=None, **size):
    """Values and indices exactly the CPU's (`tpu_x`: x's values on tpu, by default x.to(TPU));
    returns the tpu results."""
    fn = POOLS[dims]
    expected = native_cpu(fn, x, kernel, return_indices=True, _random_samples=samples, **size)
    tpu_x = x.to(TPU) if tpu_x is None else tpu_x
    actual = fn(tpu_x, kernel, return_indices=True, _random_samples=samples.to(TPU), **size)
    assert_close(actual[0], expected[0], rtol=0, atol=0)
    assert_close(actual[1], expected[1])
    return actual


# (input shape, kernel_size, output size arguments)
CASES_2D = [
    ((2, 3, 10, 9), 2, dict(output_size=5)),
    ((2, 3, 10, 9), (3, 2), dict(output_size=(4, 7))),
    ((1, 4, 13, 17), 3, dict(output_ratio=(0.5, 0.5))),
    ((2, 2, 12, 8), (2, 3), dict(output_ratio=(0.7, 0.4))),
    ((3, 11, 7), 2, dict(output_size=(6, 3))),  # unbatched
    ((2, 3, 6, 6), 1, dict(output_size=6)),  # alpha = 1: every position its own window
    ((2, 3, 8, 5), (3, 2), dict(output_size=(6, 4))),  # the largest output: alpha = 1
    ((2, 3, 9, 7), (4, 3), dict(output_size=1)),  # one window, at the end
    ((2, 3, 9, 7), (2, 2), dict(output_size=(2, 2))),  # alpha = in - pool
    ((2, 5, 11, 11), (3, 3), dict(output_size=(5, 5))),  # alpha = 2, an integer
]

CASES_3D = [
    ((2, 2, 7, 8, 9), 2, dict(output_size=4)),
    ((1, 3, 6, 9, 7), (2, 3, 1), dict(output_size=(3, 5, 6))),
    ((2, 2, 10, 8, 6), 3, dict(output_ratio=(0.5, 0.5, 0.5))),
    ((3, 7, 6, 8), 2, dict(output_size=(3, 4, 5))),  # unbatched
    ((2, 2, 5, 5, 5), (2, 1, 3), dict(output_size=1)),
    ((1, 2, 6, 6, 6), 1, dict(output_size=5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kernel, size", CASES_2D)
def test_fractional_max_pool2d_matches_cpu(shape, kernel, size, dtype):
    x = make(shape, dtype)
    check_forward(2, x, kernel, samples_for(x, 2), **size)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, kernel, size", CASES_3D)
def test_fractional_max_pool3d_matches_cpu(shape, kernel, size, dtype):
    x = make(shape, dtype)
    check_forward(3, x, kernel, samples_for(x, 3), **size)


@pytest.mark.parametrize("dtype", DTYPES)
def test_window_starts_match_cpu_over_many_samples(dtype):
    """Every plane has its own samples: 2 x 128 planes of random ones, with the extremes (0 and
    the largest value below 1) among them, over sizes where bf16/f16 cannot hold every position
    (so the CPU's rounding of i and each product decides the windows)."""
    for plane, kernel, out in [((9, 31), (2, 3), (8, 29)), ((7, 700), (1, 2), (3, 650))]:
        x = make((2, 128) + plane, dtype)
        samples = samples_for(x, 2, seed=plane[1])
        below_one = 1 - torch.finfo(dtype).eps / 2
        samples[0, :4] = torch.tensor([[0.0, 0.0], [0.0, below_one], [below_one, 0.5], [0.25, 1.0]], dtype=dtype)
        check_forward(2, x, kernel, samples, output_size=out)
    x = make((1, 64, 2100, 3), dtype)  # f16 rounds positions above 2048
    check_forward(2, x, (2, 1), samples_for(x, 2, seed=5), output_size=(2000, 3))


def test_samples_beyond_the_batch_are_unused():
    x = make((2, 3, 10, 10))
    check_forward(2, x, 2, samples_for(x, 2, rows=5), output_size=4)
    unbatched = make((3, 9, 9, 9))
    check_forward(3, unbatched, 2, samples_for(unbatched, 3, rows=2), output_size=3)


@pytest.mark.parametrize("dims", [2, 3])
def test_noncontiguous_input(dims):
    x = make((2, 3) + (8,) * dims)
    samples = samples_for(x, dims)
    check_forward(dims, x.transpose(0, 1).contiguous().transpose(0, 1), 2, samples, output_size=4)
    check_forward(dims, x, (2,) * dims, samples, tpu_x=noncontiguous(x.to(TPU)), output_size=5)
    channels_last = x.to(memory_format=torch.channels_last if dims == 2 else torch.channels_last_3d)
    check_forward(dims, channels_last, 3, samples, output_size=4)
    check_forward(dims, x, 2, samples, tpu_x=x.to(TPU), output_size=4)
    strided_samples = make((dims, 3, 2)).permute(2, 1, 0)
    check_forward(dims, x, 2, strided_samples, tpu_x=x.to(TPU), output_size=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [2, 3])
def test_ties_pick_the_first_maximum(dims, dtype):
    x = make((2, 4) + (9,) * dims, torch.int64, low=0, high=3).to(dtype)
    check_forward(dims, x, 3, samples_for(x, dims), output_size=5)
    check_forward(dims, torch.full_like(x, -float("inf")), 2, samples_for(x, dims), output_size=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [2, 3])
def test_nan_wins_and_the_last_nan_is_kept(dims, dtype):
    x = make((2, 3) + (8,) * dims, dtype)
    flat = x.view(-1)
    flat[torch.randperm(flat.numel(), generator=torch.Generator().manual_seed(1))[: flat.numel() // 6]] = float("nan")
    x[0, 0] = float("inf")
    x[0, 0, 1] = float("nan")
    check_forward(dims, x, 3, samples_for(x, dims), output_size=4)


@pytest.mark.parametrize("dims", [2, 3])
def test_return_indices_false_gives_the_values(dims):
    x = make((2, 3) + (7,) * dims)
    samples = samples_for(x, dims)
    expected = native_cpu(POOLS[dims], x, 2, output_size=3, _random_samples=samples)
    assert_close(POOLS[dims](x.to(TPU), 2, output_size=3, _random_samples=samples.to(TPU)), expected)


@pytest.mark.parametrize("dims", [2, 3])
def test_modules(dims):
    module = (torch.nn.FractionalMaxPool2d if dims == 2 else torch.nn.FractionalMaxPool3d)(
        2, output_ratio=0.5, return_indices=True, _random_samples=None
    )
    x = make((2, 3) + (8,) * dims)
    samples = samples_for(x, dims)
    module._random_samples = samples
    expected = native_cpu(module, x)
    module._random_samples = samples.to(TPU)
    actual = module(x.to(TPU))
    assert_close(actual[0], expected[0], rtol=0, atol=0)
    assert_close(actual[1], expected[1])


def test_empty_batch_and_output():
    x = make((0, 3, 9, 9))
    check_forward(2, x, 2, samples_for(x, 2), output_size=4)
    x3 = make((0, 2, 6, 6, 6))
    check_forward(3, x3, 2, samples_for(x3, 3), output_size=3)
    x = make((2, 3, 8, 8))
    check_forward(2, x, 2, samples_for(x, 2), output_size=(0, 3))


# ---- backward ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "dims, shape, kernel, size",
    [
        (2, (2, 3, 10, 9), 3, dict(output_size=(7, 6))),  # overlapping windows
        (2, (3, 8, 8), 2, dict(output_ratio=(0.5, 0.5))),
        (2, (2, 2, 5, 6), 1, dict(output_size=(5, 6))),
        (3, (2, 2, 7, 8, 6), 3, dict(output_size=(4, 5, 3))),
        (3, (2, 6, 6, 6), 2, dict(output_size=3)),
    ],
)
def test_gradient_matches_cpu(dims, shape, kernel, size, dtype):
    x = make(shape, dtype)
    samples = samples_for(x, dims)
    cpu_x = x.clone().requires_grad_(True)
    tpu_x = x.to(TPU).requires_grad_(True)
    expected = POOLS[dims](cpu_x, kernel, _random_samples=samples, **size)
    actual = POOLS[dims](tpu_x, kernel, _random_samples=samples.to(TPU), **size)
    assert_close(actual, expected, rtol=0, atol=0)
    grad = make(expected.shape, dtype)
    expected.backward(grad, retain_graph=True)
    actual.backward(grad.to(TPU), retain_graph=True)
    assert_close(tpu_x.grad, cpu_x.grad)
    # Integer gradients add exactly in any order: equal bits.
    cpu_x.grad = tpu_x.grad = None
    grad = make(expected.shape, torch.int64, low=-4, high=5).to(dtype)
    torch.autograd.backward(expected, grad)
    torch.autograd.backward(actual, grad.to(TPU))
    assert_close(tpu_x.grad, cpu_x.grad, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("dims", [2, 3])
def test_reduced_precision_gradient(dims, dtype):
    """The CPU's bf16/f16 backward adds overlapping windows' gradients in the reduced type, one
    rounding per addition; tpu adds in f32 and rounds once, as conftest's reference does."""
    x = make((2, 3) + (9,) * dims, dtype)
    samples = samples_for(x, dims)
    tpu_x = x.to(TPU).requires_grad_(True)
    values, indices = POOLS[dims](tpu_x, 3, output_size=6, return_indices=True, _random_samples=samples.to(TPU))
    expected_indices = native_cpu(POOLS[dims], x, 3, output_size=6, return_indices=True, _random_samples=samples)[1]
    assert_close(indices, expected_indices)
    grad = make(values.shape, dtype)
    values.backward(grad.to(TPU))
    expected = BACKWARD[dims](grad, x, [3] * dims, [6] * dims, expected_indices)
    assert_close(tpu_x.grad, expected)


@pytest.mark.parametrize("dims", [2, 3])
def test_backward_op_with_noncontiguous_gradient(dims):
    x = make((2, 3) + (8,) * dims)
    indices = native_cpu(POOLS[dims], x, 2, output_size=5, return_indices=True, _random_samples=samples_for(x, dims))[1]
    grad = make((2, 3) + (5,) * dims)
    expected = BACKWARD[dims](grad, x, [2] * dims, [5] * dims, indices)
    actual = BACKWARD[dims](noncontiguous(grad.to(TPU)), x.to(TPU), [2] * dims, [5] * dims, indices.to(TPU))
    assert_close(actual, expected)


# ---- samples from the generator ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dims", [2, 3])
def test_samples_drawn_on_tpu(dims, dtype):
    """Without `_random_samples` the functional draws them with torch.rand on the input's device:
    tpu's generator, so the values differ from the CPU's. Reseeded, the same draw gives the samples
    used, and the CPU with those samples gives the same result."""
    x = make((2, 3) + (9,) * dims, dtype)
    torch.tpu.manual_seed(7)
    values, indices = POOLS[dims](x.to(TPU), 2, output_size=4, return_indices=True)
    assert values.shape == indices.shape == (2, 3) + (4,) * dims
    flat_indices = indices.cpu().flatten(2)
    assert bool(((flat_indices >= 0) & (flat_indices < 9**dims)).all())
    assert torch.equal(values.cpu().flatten(2), x.flatten(2).gather(2, flat_indices))
    torch.tpu.manual_seed(7)
    samples = torch.rand(2, 3, dims, dtype=dtype, device=TPU)
    check_forward(dims, x, 2, samples.cpu(), output_size=4)
    # Successive calls draw fresh samples.
    assert not all(
        torch.equal(indices, POOLS[dims](x.to(TPU), 2, output_size=4, return_indices=True)[1]) for _ in range(3)
    )


def test_unbatched_samples_drawn_on_tpu():
    x = make((3, 10, 10))
    values = F.fractional_max_pool2d(x.to(TPU), 3, output_ratio=(0.6, 0.6))
    assert values.shape == (3, 6, 6)


# ---- errors ----


def error_cases(device: torch.device):
    """Calls that the CPU rejects, each a function of the device."""

    def pool(dims, shape, kernel, samples_shape=None, dtype=torch.float32, samples_dtype=None, **size):
        x = torch.ones(shape, dtype=dtype, device=device)
        if samples_shape is None:
            samples_shape = ((shape[0] if len(shape) == dims + 2 else 1), shape[-dims - 1], dims)
        samples = torch.full(samples_shape, 0.5, dtype=samples_dtype or dtype, device=device)
        return POOLS[dims](x, kernel, _random_samples=samples, **size)

    return {
        "kernel too large 2d": lambda: pool(2, (1, 2, 6, 6), 3, output_size=5),
        "kernel too large width": lambda: pool(2, (1, 2, 6, 6), (2, 4), output_size=(4, 4)),
        "kernel too large 3d": lambda: pool(3, (1, 2, 6, 6, 6), 3, output_size=4),
        "3d bound is strict": lambda: pool(3, (1, 2, 6, 6, 6), 3, output_size=(4, 3, 3)),
        "samples of 2 dims": lambda: pool(2, (1, 2, 6, 6), 2, samples_shape=(2, 2), output_size=3),
        "samples for 3 axes": lambda: pool(2, (1, 2, 6, 6), 2, samples_shape=(1, 2, 3), output_size=3),
        "samples for 2 axes in 3d": lambda: pool(3, (1, 2, 6, 6, 6), 2, samples_shape=(1, 2, 2), output_size=3),
        "too few sample rows": lambda: pool(2, (3, 2, 6, 6), 2, samples_shape=(2, 2, 2), output_size=3),
        "wrong sample channels": lambda: pool(2, (1, 2, 6, 6), 2, samples_shape=(1, 3, 2), output_size=3),
        "samples of another dtype": lambda: pool(2, (1, 2, 6, 6), 2, samples_dtype=torch.float64, output_size=3),
        "5-d input to 2d": lambda: pool(2, (1, 1, 2, 6, 6), 2, samples_shape=(1, 1, 2), output_size=3),
        "empty plane": lambda: pool(2, (1, 2, 0, 6), 1, output_size=(0, 3)),
        "no size": lambda: pool(2, (1, 2, 6, 6), 2),
    }


@pytest.mark.parametrize("case", list(error_cases(TPU)))
def test_errors_match_cpu(case):
    raises_like_cpu(lambda device: error_cases(device)[case]())


@pytest.mark.parametrize("dtype, name", [(torch.int64, "Long"), (torch.int32, "Int")])
@pytest.mark.parametrize("dims", [2, 3])
def test_integer_input_is_rejected_as_on_cpu(dims, dtype, name):
    """The CPU kernel has no integer forms; tpu raises the same NotImplementedError, its message
    inside tpu's own (unsupported-op) text."""
    x = torch.ones((1, 2) + (6,) * dims, dtype=dtype)
    samples = torch.zeros(1, 2, dims, dtype=dtype)
    message = f"\"fractional_max_pool{dims}d_out_frame\" not implemented for '{name}'"
    with pytest.raises(NotImplementedError, match=message):
        POOLS[dims](x, 2, output_size=3, _random_samples=samples)
    with pytest.raises(NotImplementedError, match=message):
        POOLS[dims](x.to(TPU), 2, output_size=3, _random_samples=samples.to(TPU))


def test_backward_errors_match_cpu():
    def backward(device, grad_shape):
        x = torch.ones(1, 2, 6, 6, device=device)
        grad = torch.ones(grad_shape, device=device)
        indices = torch.zeros(grad_shape, dtype=torch.int64, device=device)
        return BACKWARD[2](grad, x, [2, 2], [3, 3], indices)

    raises_like_cpu(lambda device: backward(device, (1, 2, 3, 4)))
    raises_like_cpu(lambda device: backward(device, (1, 2, 4, 3)))

    def backward3d(device, grad_shape):
        x = torch.ones(1, 2, 6, 6, 6, device=device)
        grad = torch.ones(grad_shape, device=device)
        indices = torch.zeros(grad_shape, dtype=torch.int64, device=device)
        return BACKWARD[3](grad, x, [2, 2, 2], [3, 3, 3], indices)

    for grad_shape in [(1, 2, 4, 3, 3), (1, 2, 3, 4, 3), (1, 2, 3, 3, 4), (1, 2, 3, 3)]:
        raises_like_cpu(lambda device, grad_shape=grad_shape: backward3d(device, grad_shape))
