"""im2col / col2im (F.unfold, F.fold, nn.Unfold, nn.Fold) against PyTorch on the CPU, forward and
backward (each is the other's backward)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

# (input shape, window arguments): batched and unbatched, every window argument set.
UNFOLD_CASES = [
    ((2, 3, 8, 7), dict(kernel_size=3)),
    ((3, 9, 10), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3))),
    ((1, 2, 5, 5), dict(kernel_size=(1, 2), dilation=1, padding=1, stride=(1, 2))),
]


def _leaf(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    cpu = x.clone().requires_grad_()
    return cpu, x.to(TPU).requires_grad_()


def _no_fallbacks():
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def _fold_case(shape, window):
    """The columns F.unfold makes for `shape`, and fold's output_size."""
    columns = F.unfold(torch.zeros(shape), **window)
    return columns.shape, shape[-2:]


@pytest.mark.parametrize("shape,window", UNFOLD_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unfold_forward_backward(shape, window, dtype):
    torch_tpu.metrics.reset()
    # Half precision: the reference computes in f32 and rounds once, as the lowering does (the
    # CPU's col2im sums overlapping columns in bf16, rounding after every term).
    x, xt = _leaf(make(shape, dtype).float())
    xt = xt.detach().to(dtype).requires_grad_()
    y, yt = F.unfold(x, **window), F.unfold(xt, **window)
    assert_close(yt, y.detach().to(dtype))
    grad = make(y.shape, dtype)
    y.backward(grad.float())
    yt.backward(grad.to(TPU))
    assert_close(xt.grad, x.grad.to(dtype))
    _no_fallbacks()


@pytest.mark.parametrize("shape,window", UNFOLD_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fold_forward_backward(shape, window, dtype):
    torch_tpu.metrics.reset()
    columns_shape, output_size = _fold_case(shape, window)
    c, ct = _leaf(make(columns_shape, dtype).float())  # f32 reference, as above
    ct = ct.detach().to(dtype).requires_grad_()
    y, yt = F.fold(c, output_size, **window), F.fold(ct, output_size, **window)
    assert_close(yt, y.detach().to(dtype))
    grad = make(y.shape, dtype)
    y.backward(grad.float())
    yt.backward(grad.to(TPU))
    assert_close(ct.grad, c.grad.to(dtype))
    _no_fallbacks()


def test_bool_unfold_and_fold():
    torch_tpu.metrics.reset()
    x = make((2, 2, 6, 6), torch.bool)
    window = dict(kernel_size=3, padding=1, stride=2)
    columns = F.unfold(x, **window)
    assert_close(F.unfold(x.to(TPU), **window), columns)
    assert_close(F.fold(columns.to(TPU), (6, 6), **window), F.fold(columns, (6, 6), **window))
    _no_fallbacks()


def test_modules_and_noncontiguous_inputs():
    torch_tpu.metrics.reset()
    unfold = torch.nn.Unfold(kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    fold = torch.nn.Fold(output_size=(7, 6), kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    x = make((2, 3, 7, 6))
    assert_close(unfold(noncontiguous(x.to(TPU))), unfold(x))
    columns = make(unfold(x).shape)
    assert_close(fold(noncontiguous(columns.to(TPU))), fold(columns))
    _no_fallbacks()


def test_out_variants():
    torch_tpu.metrics.reset()
    x = make((2, 3, 6, 6))
    args = ((2, 2), (1, 1), (0, 0), (2, 2))
    out = torch.empty(0, device=TPU)
    result = torch._C._nn.im2col(x.to(TPU), *args, out=out)
    assert result is out
    columns = torch._C._nn.im2col(x, *args)
    assert_close(out, columns)
    folded = torch.empty(0, device=TPU)
    torch._C._nn.col2im(columns.to(TPU), (6, 6), *args, out=folded)
    assert_close(folded, torch._C._nn.col2im(columns, (6, 6), *args))
    _no_fallbacks()


def test_empty_batch():
    x = make((0, 3, 5, 5))
    assert_close(F.unfold(x.to(TPU), 2), F.unfold(x, 2))
    c = make((0, 12, 16))
    assert_close(F.fold(c.to(TPU), (5, 5), 2), F.fold(c, (5, 5), 2))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_inputs_rejected_as_on_cpu(dtype):
    x = make((1, 2, 4, 4), dtype)
    name = {torch.int64: "Long", torch.int32: "Int"}[dtype]
    with pytest.raises(NotImplementedError, match=f"\"im2col_out_cpu\" not implemented for '{name}'"):
        F.unfold(x, 2)
    with pytest.raises(NotImplementedError, match=f"\"im2col_out_cpu\" not implemented for '{name}'"):
        F.unfold(x.to(TPU), 2)
    c = make((1, 8, 9), dtype)
    with pytest.raises(NotImplementedError, match=f"\"col2im_out_cpu\" not implemented for '{name}'"):
        F.fold(c.to(TPU), (4, 4), 2)


def test_fold_block_count_mismatch_is_rejected():
    # The check is PyTorch's meta function's, whose wording differs from the CPU kernel's.
    c = make((1, 8, 10))
    with pytest.raises(RuntimeError, match="3 \\* 3 = 9, but got input.size\\(2\\)=10"):
        F.fold(c, (4, 4), 2)
    with pytest.raises(RuntimeError, match="expected input.size\\(-1\\) to be 9 but got 10"):
        F.fold(c.to(TPU), (4, 4), 2)
