"""F.embedding_bag / nn.EmbeddingBag (_embedding_bag, _embedding_bag_forward_only and their
backward ops) against PyTorch on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

# Bags: [1, 2], [], [4, 1, 4], [3, 2, 9] (an empty bag, repeated indices within and across bags).
INDICES = torch.tensor([1, 2, 4, 1, 4, 3, 2, 9])
OFFSETS = torch.tensor([0, 2, 2, 5])
LAST_OFFSETS = torch.tensor([0, 2, 2, 5, 8])  # include_last_offset: the end of the last bag


def _no_fallbacks():
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def _check(weight, indices, offsets, per_sample_weights=None, grad_tolerance=None, **kwargs):
    """Forward and backward (weight, per_sample_weights) on both devices."""
    torch_tpu.metrics.reset()
    w, wt = weight.clone().requires_grad_(), weight.to(TPU).requires_grad_()
    psw = psw_t = None
    if per_sample_weights is not None:
        psw = per_sample_weights.clone().requires_grad_()
        psw_t = per_sample_weights.to(TPU).requires_grad_()
    to_tpu = (lambda t: t.to(TPU)) if offsets is not None else (lambda t: t)
    y = F.embedding_bag(indices, w, offsets, per_sample_weights=psw, **kwargs)
    yt = F.embedding_bag(indices.to(TPU), wt, to_tpu(offsets), per_sample_weights=psw_t, **kwargs)
    assert_close(yt, y)
    grad = make(y.shape, y.dtype)
    y.backward(grad)
    yt.backward(grad.to(TPU))
    assert_close(wt.grad, w.grad, **(grad_tolerance or {}))
    if psw is not None:
        assert_close(psw_t.grad, psw.grad)
    _no_fallbacks()


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_modes(mode, include_last_offset, padding_idx):
    offsets = LAST_OFFSETS if include_last_offset else OFFSETS
    _check(
        make((10, 3)),
        INDICES,
        offsets,
        mode=mode,
        include_last_offset=include_last_offset,
        padding_idx=padding_idx,
    )


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_per_sample_weights(padding_idx):
    _check(make((10, 3)), INDICES, OFFSETS, per_sample_weights=make((8,)), mode="sum", padding_idx=padding_idx)


def test_two_dimensional_input_and_module():
    _check(make((10, 4)), torch.tensor([[1, 2, 3], [3, 4, 9]]), None, mode="mean")
    torch_tpu.metrics.reset()
    bag = torch.nn.EmbeddingBag(10, 4, mode="max")
    bag_tpu = torch.nn.EmbeddingBag(10, 4, mode="max").to(TPU)
    bag_tpu.load_state_dict(bag.state_dict())
    assert_close(bag_tpu(INDICES.to(TPU), OFFSETS.to(TPU)), bag(INDICES, OFFSETS))
    _no_fallbacks()


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_int32_indices_bf16_and_noncontiguous_weight(mode):
    _check(noncontiguous(make((10, 3))), INDICES.int(), OFFSETS.int(), mode=mode)
    # The CPU's half-precision gradient sums in bf16; the lowering in f32, rounded once.
    _check(make((10, 3), torch.bfloat16), INDICES, OFFSETS, mode=mode, grad_tolerance=dict(rtol=3e-2, atol=3e-2))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq(mode):
    # The CPU's embedding_bag scales by the wrong count for some mixed-count indices
    # (pytorch/pytorch#190063), so the reference is F.embedding's scaling (a count per index over
    # all indices), summed or averaged over each bag.
    torch_tpu.metrics.reset()
    weight = make((10, 3))
    w, wt = weight.clone().requires_grad_(), weight.to(TPU).requires_grad_()
    bags = torch.tensor([0, 0, 2, 2, 2, 3, 3, 3])
    rows = F.embedding(INDICES, w, scale_grad_by_freq=True)
    sizes = torch.bincount(bags, minlength=4).clamp(min=1).unsqueeze(1).float()
    y = torch.zeros(4, 3).index_add(0, bags, rows)
    if mode == "mean":
        y = y / sizes
    yt = F.embedding_bag(INDICES.to(TPU), wt, OFFSETS.to(TPU), mode=mode, scale_grad_by_freq=True)
    assert_close(yt, y)
    grad = make(y.shape)
    y.backward(grad)
    yt.backward(grad.to(TPU))
    assert_close(wt.grad, w.grad)
    _no_fallbacks()


def test_auxiliary_outputs_match_cpu():
    torch_tpu.metrics.reset()
    weight = make((10, 3))
    for mode in [1, 2]:  # mean, max (the CPU's sum fast path leaves them empty)
        for op in [torch.ops.aten._embedding_bag, torch.ops.aten._embedding_bag_forward_only]:
            expected = op(weight, INDICES, OFFSETS, False, mode, False, None, False, 4)
            actual = op(weight.to(TPU), INDICES.to(TPU), OFFSETS.to(TPU), False, mode, False, None, False, 4)
            assert_close(actual[0], expected[0])
            assert_close(actual[1], expected[1])  # offset2bag
            assert_close(actual[2], expected[2])  # bag_size (no padding_idx entries)
            if mode == 2:
                filled = expected[2] > 0
                assert_close(actual[3][filled.to(TPU)], expected[3][filled])  # max_indices
    _no_fallbacks()


def test_max_ties_and_nan():
    torch_tpu.metrics.reset()
    weight = torch.tensor([[1.0, 5.0], [1.0, float("nan")], [3.0, float("nan")], [0.0, 2.0]])
    indices, offsets = torch.tensor([0, 1, 2, 3, 0, 1]), torch.tensor([0, 2, 4])
    expected = torch.ops.aten._embedding_bag(weight, indices, offsets, False, 2, False, None, False, -1)
    actual = torch.ops.aten._embedding_bag(
        weight.to(TPU), indices.to(TPU), offsets.to(TPU), False, 2, False, None, False, -1
    )
    assert_close(actual[0], expected[0])
    assert_close(actual[3], expected[3])  # ties keep the first maximum; the first NaN wins
    _no_fallbacks()


def test_forward_only_under_no_grad_and_empty_inputs():
    torch_tpu.metrics.reset()
    weight = make((10, 3))
    with torch.no_grad():
        for mode in ["sum", "mean", "max"]:
            assert_close(
                F.embedding_bag(INDICES.to(TPU), weight.to(TPU), OFFSETS.to(TPU), mode=mode),
                F.embedding_bag(INDICES, weight, OFFSETS, mode=mode),
            )
            empty = torch.tensor([], dtype=torch.long)
            assert_close(
                F.embedding_bag(empty.to(TPU), weight.to(TPU), torch.tensor([0, 0]).to(TPU), mode=mode),
                F.embedding_bag(empty, weight, torch.tensor([0, 0]), mode=mode),
            )
    _no_fallbacks()


def test_out_variant():
    torch_tpu.metrics.reset()
    weight = make((10, 3))
    expected = torch.ops.aten._embedding_bag(weight, INDICES, OFFSETS, False, 1)
    outs = [torch.empty(0, device=TPU), *(torch.empty(0, dtype=torch.long, device=TPU) for _ in range(3))]
    torch.ops.aten._embedding_bag.out(
        weight.to(TPU),
        INDICES.to(TPU),
        OFFSETS.to(TPU),
        False,
        1,
        out0=outs[0],
        out1=outs[1],
        out2=outs[2],
        out3=outs[3],
    )
    assert_close(outs[0], expected[0])
    assert_close(outs[1], expected[1])
    _no_fallbacks()


def test_errors():
    weight = make((10, 3))
    with pytest.raises(
        NotImplementedError, match="per_sample_weights is only supported for mode='sum' \\(got mode='mean'\\)"
    ):
        F.embedding_bag(
            INDICES.to(TPU), weight.to(TPU), OFFSETS.to(TPU), mode="mean", per_sample_weights=torch.ones(8, device=TPU)
        )
    # dtype checks: the CPU's are in its kernel; on tpu PyTorch's meta function makes them, in its words.
    cases = [
        (
            lambda w, i, o: F.embedding_bag(i, w.long(), o),
            "argument #1 'weight'",
            "expected weight to be floating point type",
        ),
        (
            lambda w, i, o: F.embedding_bag(i.float(), w, o),
            "argument #1 'indices'",
            "expected indices to be long or int",
        ),
        (
            lambda w, i, o: F.embedding_bag(i, w, o.float()),
            "'indices' to have one",
            "expected offsets to be long or int",
        ),
    ]
    for fn, cpu_message, tpu_message in cases:
        with pytest.raises(RuntimeError, match=cpu_message):
            fn(weight, INDICES, OFFSETS)
        with pytest.raises(RuntimeError, match=tpu_message):
            fn(weight.to(TPU), INDICES.to(TPU), OFFSETS.to(TPU))
