"""bincount, histc, repeat_interleave, mode, frexp and tril/triu_indices on tpu against the CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def assert_same_error(fn, *args, **kwargs):
    """fn raises on the CPU and on tpu with the same type and message."""
    with pytest.raises(Exception) as cpu:
        fn(*[a for a in args], **kwargs)
    moved = [a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*moved, **kwargs)
    assert str(cpu.value) in str(tpu.value)


# ---- bincount ----


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
def test_bincount(dtype):
    x = make((50,), dtype, low=0, high=12)
    assert_close(torch.bincount(x.to(TPU)), torch.bincount(x))
    assert_close(torch.bincount(x.to(TPU), minlength=20), torch.bincount(x, minlength=20))
    assert_close(torch.bincount(noncontiguous(x.to(TPU))), torch.bincount(x))


@pytest.mark.parametrize("weight_dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool])
def test_bincount_weights(weight_dtype):
    x = make((40,), torch.int64, low=0, high=9)
    weights = make((40,), weight_dtype)
    expected = torch.bincount(x, weights, minlength=4)
    assert_close(torch.bincount(x.to(TPU), weights.to(TPU), minlength=4), expected, rtol=1e-5, atol=1e-5)


def test_bincount_empty_and_errors():
    empty = torch.empty(0, dtype=torch.long)
    assert_close(torch.bincount(empty.to(TPU), minlength=3), torch.bincount(empty, minlength=3))
    assert_close(torch.bincount(empty.to(TPU)), torch.bincount(empty))
    assert_same_error(torch.bincount, torch.tensor([1, -1, 2]))
    assert_same_error(torch.bincount, torch.ones(2, 3, dtype=torch.long))
    assert_same_error(torch.bincount, torch.tensor(3))
    assert_same_error(torch.bincount, torch.ones(3))
    assert_same_error(torch.bincount, torch.tensor([True]))
    assert_same_error(torch.bincount, torch.tensor([1, 2]), minlength=-1)
    assert_same_error(torch.bincount, torch.tensor([1, 2]), torch.ones(3))
    assert_same_error(torch.bincount, torch.tensor([2**63 - 1]))


# ---- histc ----


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_histc_data_range(dtype):
    x = make((4, 25), dtype)
    assert_close(torch.histc(x.to(TPU), bins=9), torch.histc(x, bins=9))
    assert_close(torch.histc(noncontiguous(x.to(TPU)), bins=5, min=2, max=2), torch.histc(x, bins=5, min=2, max=2))


@pytest.mark.parametrize("dtype", FLOATS)
def test_histc_given_range_edges_and_nan(dtype):
    # Values on the edges (the last bin keeps its right edge), outside them, and NaN.
    x = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, float("nan"), 3.0]).to(dtype)
    for bins, low, high in [(4, -1, 1), (3, -1.0, 1.5), (1, 0, 1)]:
        expected = torch.histc(x, bins=bins, min=low, max=high)
        assert_close(torch.histc(x.to(TPU), bins=bins, min=low, max=high), expected)
    random = make((200,), dtype)
    assert_close(torch.histc(random.to(TPU), bins=13, min=-2, max=2.5), torch.histc(random, bins=13, min=-2, max=2.5))


def test_histc_single_point_empty_0d_and_out():
    ones = torch.ones(6)
    assert_close(torch.histc(ones.to(TPU), bins=4), torch.histc(ones, bins=4))
    empty = torch.empty(0)
    assert_close(torch.histc(empty.to(TPU), bins=4), torch.histc(empty, bins=4))
    scalar = torch.tensor(2.5)
    assert_close(torch.histc(scalar.to(TPU), bins=3), torch.histc(scalar, bins=3))
    x = make((30,))
    out = torch.empty(0, device=TPU)
    result = torch.histc(x.to(TPU), bins=6, min=-3, max=3, out=out)
    assert result is out
    assert_close(out, torch.histc(x, bins=6, min=-3, max=3))


def test_histc_errors():
    x = make((5,))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x.to(TPU), bins=3, min=2, max=1)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x.to(TPU), bins=0)
    assert_same_error(torch.histc, x, bins=3, min=0, max=float("inf"))
    with pytest.raises(NotImplementedError, match="\"histogram_cpu\" not implemented for 'Bool'"):
        torch.histc(torch.ones(3, dtype=torch.bool, device=TPU), bins=3)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_histc_integers_count_as_on_cuda(dtype):
    # The CPU has no integer histc; CUDA's counts as the float histc of the same values (the
    # bin's integer quotient is exact here), in the input's dtype. Hugging Face's MoE layers
    # call it on int expert ids off the CPU, with min=0, max=experts-1 and a sentinel of
    # `experts` that must not count.
    low = 0 if dtype == torch.uint8 else -20
    x = torch.randint(low, 40, (300,), dtype=dtype)
    for bins, lo, hi in [(7, 0, 0), (40, 0, 39), (6, -5, 31), (1, 3, 3)]:
        if dtype == torch.uint8 and lo < 0:
            continue
        got = torch.histc(noncontiguous(x.to(TPU)), bins=bins, min=lo, max=hi)
        assert got.dtype == dtype
        assert_close(got, torch.histc(x.double(), bins=bins, min=lo, max=hi).to(dtype))
    experts = torch.randint(0, 9, (64, 2), dtype=torch.int32)  # 8 experts, 8 the sentinel
    counts = torch.histc(experts.to(TPU), bins=8, min=0, max=7)
    assert_close(counts, torch.bincount(experts.flatten(), minlength=9)[:8].int())


# ---- repeat_interleave ----


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_tensor(dtype):
    repeats = make((12,), dtype, low=0, high=5)
    expected = torch.repeat_interleave(repeats)
    assert_close(torch.repeat_interleave(repeats.to(TPU)), expected)
    total = int(repeats.sum())
    assert_close(torch.repeat_interleave(noncontiguous(repeats.to(TPU)), output_size=total), expected)
    zeros = torch.zeros(3, dtype=dtype)
    assert_close(torch.repeat_interleave(zeros.to(TPU)), torch.repeat_interleave(zeros))
    empty = torch.empty(0, dtype=dtype)
    assert_close(torch.repeat_interleave(empty.to(TPU)), torch.repeat_interleave(empty))


def test_repeat_interleave_self_tensor_with_grad():
    x = make((4, 3)).requires_grad_()
    repeats = torch.tensor([2, 0, 1, 3])
    expected = torch.repeat_interleave(x, repeats, dim=0)
    x_tpu = x.detach().to(TPU).requires_grad_()
    actual = torch.repeat_interleave(x_tpu, repeats.to(TPU), dim=0)
    assert_close(actual, expected)
    grad = make(expected.shape)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(x_tpu.grad, x.grad)


def test_repeat_interleave_errors():
    assert_same_error(torch.repeat_interleave, torch.tensor([1, -1, 2]))
    assert_same_error(torch.repeat_interleave, torch.tensor([[1, 2]]))
    assert_same_error(torch.repeat_interleave, torch.tensor(2))
    assert_same_error(torch.repeat_interleave, torch.tensor([1.0, 2.0]))


# ---- mode ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mode_small_rows(dtype, keepdim):
    # Rows of at most 16 elements, where the CPU's sort is stable and its indices are defined.
    x = make((5, 7, 11), dtype, low=0, high=4) if dtype != torch.bool else make((5, 7, 11), dtype)
    if dtype.is_floating_point:
        x = x.round()
    for dim in (0, 1, -1):
        expected = torch.mode(x, dim, keepdim)
        actual = torch.mode(x.to(TPU), dim, keepdim)
        assert_close(actual.values, expected.values)
        assert_close(actual.indices, expected.indices)


def test_mode_long_rows_noncontiguous_and_0d():
    x = make((6, 300), torch.int64, low=0, high=25)
    expected = torch.mode(x, 1)
    actual = torch.mode(noncontiguous(x.to(TPU)), 1)
    assert_close(actual.values, expected.values)
    # The CPU's index among equal values is unspecified for long rows: check it names the mode.
    assert torch.equal(x.gather(1, actual.indices.cpu()[:, None])[:, 0], expected.values)
    scalar = torch.tensor(4.0)
    assert_close(torch.mode(scalar.to(TPU)).values, torch.mode(scalar).values)
    assert_close(torch.mode(scalar.to(TPU)).indices, torch.mode(scalar).indices)


def test_mode_backward_and_errors():
    x = make((4, 9), low=0, high=3).round().requires_grad_()
    x_tpu = x.detach().to(TPU).requires_grad_()
    expected = torch.mode(x, 1).values
    actual = torch.mode(x_tpu, 1).values
    grad = make((4,))
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    assert_close(x_tpu.grad, x.grad)
    assert_same_error(torch.mode, torch.ones(3, 0), 1)
    assert_same_error(torch.mode, torch.ones(3), 1)


# ---- frexp ----

SPECIAL = [0.0, -0.0, 1.0, -3.0, 0.75, 1e-3, -7e4, float("inf"), -float("inf"), float("nan")]


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_frexp(dtype):
    info = torch.finfo(dtype)
    values = SPECIAL + [info.tiny, info.tiny / 2, info.tiny / 1000, -info.smallest_normal / 3, info.max, -info.max]
    x = torch.cat([torch.tensor(values, dtype=torch.float64).to(dtype), make((40,), dtype) * 100])
    expected = torch.frexp(x)
    actual = torch.frexp(x.to(TPU))
    assert_close(actual.mantissa, expected.mantissa, rtol=0, atol=0)
    assert_close(actual.exponent, expected.exponent)
    nc = noncontiguous(make((3, 4), dtype).to(TPU))
    assert_close(torch.frexp(nc).mantissa, torch.frexp(nc.cpu()).mantissa, rtol=0, atol=0)


def test_frexp_out_backward_and_errors():
    x = make((3, 5), low=-10, high=10)
    mantissa = torch.empty(0, device=TPU)
    exponent = torch.empty(0, dtype=torch.int32, device=TPU)
    torch.frexp(x.to(TPU), out=(mantissa, exponent))
    assert_close(mantissa, torch.frexp(x).mantissa)
    assert_close(exponent, torch.frexp(x).exponent)
    x.requires_grad_()
    x_tpu = x.detach().to(TPU).requires_grad_()
    grad = make((3, 5))
    torch.frexp(x).mantissa.backward(grad)
    torch.frexp(x_tpu).mantissa.backward(grad.to(TPU))
    assert_close(x_tpu.grad, x.grad)
    assert_same_error(torch.frexp, torch.ones(3, dtype=torch.long))


# ---- tril_indices / triu_indices ----

TRIANGLES = [(4, 5, 0), (4, 5, 2), (5, 4, -2), (6, 2, -1), (3, 7, 10), (7, 3, 2), (1, 1, 0), (9, 9, -8), (5, 3, -7)]


@pytest.mark.parametrize("op", [torch.tril_indices, torch.triu_indices])
def test_triangle_indices(op):
    for row, col, offset in TRIANGLES:
        assert_close(op(row, col, offset, device=TPU), op(row, col, offset))
    assert_close(op(0, 3, device=TPU), op(0, 3))
    assert_close(op(6, 4, 1, dtype=torch.int32, device=TPU), op(6, 4, 1, dtype=torch.int32))


@pytest.mark.parametrize("op", [torch.tril_indices, torch.triu_indices])
def test_triangle_indices_large(op):
    # Far from the f32 root's exact range: the integer correction must keep every row right.
    for row, col, offset in [(3000, 2500, -40), (1200, 4000, 700)]:
        assert_close(op(row, col, offset, device=TPU), op(row, col, offset))


def test_triangle_indices_errors():
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        torch.tril_indices(-1, 3, device=TPU)
    with pytest.raises(RuntimeError, match="col must be non-negative"):
        torch.triu_indices(3, -4, device=TPU)
    with pytest.raises(RuntimeError, match="not implemented for"):
        torch.tril_indices(3, 3, dtype=torch.float32, device=TPU)
