"""F.ctc_loss on tpu against the CPU: _ctc_loss (loss and log_alpha) and _ctc_loss_backward, with
padded and concatenated targets, varying and zero lengths, repeated labels, impossible alignments,
every reduction, zero_infinity, non-contiguous inputs and the CPU's errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous, raises_like_cpu

import torch_tpu

# The recursions accumulate over T steps and the gradient subtracts nearly equal terms: the CPU's
# own f32 result is that far from the f64 one.
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-9, atol=1e-9)}


@pytest.fixture(autouse=True)
def no_cpu_fallback():
    torch_tpu.metrics.reset()
    yield
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def problem(steps=12, batch=4, classes=6, dtype=torch.float32, concatenated=False):
    log_probs = make((steps, batch, classes), dtype).log_softmax(-1)
    target_lengths = [3, 0, 5, 2][:batch]
    input_lengths = [steps, 7, steps - 1, 1][:batch]  # the last cannot fit its target: inf loss
    targets = make((batch, 5), torch.int64, low=1, high=classes)
    targets[0, 1] = targets[0, 0]  # a repeated label needs a blank between
    if concatenated:
        targets = torch.cat([targets[b, :n] for b, n in enumerate(target_lengths)])
    return log_probs, targets, input_lengths, target_lengths


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("concatenated", [False, True])
def test_loss_and_log_alpha(dtype, concatenated):
    log_probs, targets, input_lengths, target_lengths = problem(dtype=dtype, concatenated=concatenated)
    nll, log_alpha = torch.ops.aten._ctc_loss(log_probs, targets, input_lengths, target_lengths, 0, False)
    actual_nll, actual_alpha = torch.ops.aten._ctc_loss(
        log_probs.to(TPU), targets.to(TPU), input_lengths, target_lengths, 0, False
    )
    assert_close(actual_nll, nll, **TOL[dtype])
    assert actual_alpha.shape == log_alpha.shape
    # The CPU leaves log_alpha uninitialized past each input length and 2 * target length + 1.
    for b, (steps, length) in enumerate(zip(input_lengths, target_lengths, strict=True)):
        assert_close(actual_alpha[b, :steps, : 2 * length + 1], log_alpha[b, :steps, : 2 * length + 1], **TOL[dtype])


def loss_and_grad(log_probs, targets, input_lengths, target_lengths, **kwargs):
    log_probs = log_probs.detach().requires_grad_()
    loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, **kwargs)
    return loss, torch.autograd.grad(loss.sum(), log_probs)[0]


def check(log_probs, targets, input_lengths, target_lengths, **kwargs):
    expected = loss_and_grad(log_probs, targets, input_lengths, target_lengths, **kwargs)
    actual = loss_and_grad(log_probs.to(TPU), targets.to(TPU), input_lengths, target_lengths, **kwargs)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, **TOL[e.dtype])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_gradients(reduction, zero_infinity):
    # Without zero_infinity the impossible element's loss is inf and its gradient NaN, as on the CPU.
    check(*problem(concatenated=reduction == "sum"), reduction=reduction, zero_infinity=zero_infinity)


def test_blank_not_zero_and_int32_targets():
    log_probs, targets, input_lengths, target_lengths = problem(dtype=torch.float64)
    targets = torch.where(targets == 5, 0, targets).int()  # labels 0..4, blank 5
    check(log_probs, targets, input_lengths, target_lengths, blank=5, reduction="none")


def test_longer_sequences_and_noncontiguous_input():
    log_probs = noncontiguous(make((40, 3, 30), torch.float64).log_softmax(-1))
    assert not log_probs.is_contiguous()
    targets = make((3, 12), torch.int64, low=1, high=30)
    check(log_probs, targets, [40, 33, 25], [12, 9, 4], reduction="mean")


def test_unbatched_and_tensor_lengths():
    log_probs = make((10, 5), torch.float64).log_softmax(-1)
    targets = make((4,), torch.int64, low=1, high=5)
    check(log_probs, targets, torch.tensor(10), torch.tensor(4), reduction="sum")


def test_errors():
    log_probs = make((5, 2, 4)).log_softmax(-1)
    targets = torch.ones(2, 3, dtype=torch.int64)
    raises_like_cpu(lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), [5, 5], [3, 3], blank=4))
    raises_like_cpu(lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), [6, 5], [3, 3]))
    raises_like_cpu(lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), [5, 5], [4, 3]))
    raises_like_cpu(lambda d: F.ctc_loss(log_probs.to(d), targets.to(d), [5, 5], [-1, 3]))
    raises_like_cpu(lambda d: F.ctc_loss(log_probs.to(d), torch.ones(7, dtype=torch.int64).to(d), [5, 5], [3, 3]))
    empty = torch.empty(0, 2, 4)
    raises_like_cpu(lambda d: torch.ops.aten._ctc_loss(empty.to(d), targets.to(d), [0, 0], [3, 0]))
