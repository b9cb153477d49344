"""F.scaled_dot_product_attention on tpu runs PyTorch's overrideable fused path: one op forward,
one backward, against the CPU (f32 under HIGHEST; bf16 against the CPU in f32, then cast)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous, raises_like_cpu

import torch_tpu

pytestmark = pytest.mark.usefixtures("no_cpu_fallback")

TOL = dict(rtol=1e-5, atol=2e-5)


def leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors], [
        t.detach().to(TPU).requires_grad_() for t in tensors
    ]


def check(q, k, v, mask=None, dtype=torch.float32, **kwargs):
    """Forward and the gradients of q, k, v (and a float mask) against the CPU."""
    # The CPU computes in f32 from the same (bf16-rounded) inputs.
    q, k, v = (t.to(dtype).float() for t in (q, k, v))
    inputs = [q, k, v] + ([mask] if mask is not None and mask.is_floating_point() else [])
    cpu, tpu = leaves(*inputs)
    cpu_mask = cpu[3] if len(cpu) == 4 else mask
    tpu_mask = tpu[3] if len(tpu) == 4 else (mask.to(TPU) if mask is not None else None)
    expected = F.scaled_dot_product_attention(*cpu[:3], attn_mask=cpu_mask, **kwargs)
    actual = F.scaled_dot_product_attention(*(t.to(dtype) for t in tpu[:3]), attn_mask=tpu_mask, **kwargs)
    grad = make(expected.shape)
    expected.backward(grad)
    actual.backward(grad.to(TPU, dtype))

    def tolerance(reference):
        # bf16: a few roundings of 2^-8 through two products and the softmax, relative to the
        # tensor's scale. PyTorch's own bf16 kernel errs up to 0.020 x scale against f64 here
        # (worst of 300 seeds at test_bfloat16's shapes; ours 0.023), so 0.03 x scale.
        # f32: accumulation order against the CPU's flash kernel, also relative to the tensor's
        # scale (a large `scale` sharpens the softmax and grows the gradients).
        scale = float(reference.abs().max())
        if dtype == torch.float32:
            return dict(rtol=1e-5, atol=2e-5 * max(1.0, scale))
        return dict(rtol=2e-2, atol=3e-2 * scale)

    assert_close(actual, expected.to(dtype), **tolerance(expected))
    for c, t in zip(cpu, tpu, strict=True):
        assert_close(t.grad, c.grad, **tolerance(c.grad))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4)), ((4, 6, 16), (4, 6, 16), (4, 6, 16))])
def test_matches_the_cpu(shape, causal):
    q, k, v = (make(s) for s in shape)
    check(q, k, v, is_causal=causal)


def test_scale_and_noncontiguous_inputs():
    q, k, v = make((2, 4, 6, 8)), make((2, 4, 6, 8)), make((2, 4, 6, 8))
    cpu = F.scaled_dot_product_attention(q, k, v, scale=0.25)
    actual = F.scaled_dot_product_attention(
        noncontiguous(q.to(TPU)), k.to(TPU).transpose(1, 2).contiguous().transpose(1, 2), v.to(TPU), scale=0.25
    )
    assert_close(actual, cpu, **TOL)
    check(q, k, v, scale=1.7)


def test_boolean_mask_with_fully_masked_rows_gives_zeros():
    q, k, v = make((2, 3, 5, 8)), make((2, 3, 7, 8)), make((2, 3, 7, 4))
    mask = torch.rand(5, 7) > 0.4
    mask[2] = False  # no key for query 2: zeros, as PyTorch's math path
    check(q, k, v, mask)
    out = F.scaled_dot_product_attention(q.to(TPU), k.to(TPU), v.to(TPU), attn_mask=mask.to(TPU))
    assert torch.equal(out[:, :, 2].cpu(), torch.zeros(2, 3, 4))


def test_float_bias_broadcasts_and_gets_its_gradient():
    q, k, v = make((2, 3, 5, 8)), make((2, 3, 7, 8)), make((2, 3, 7, 4))
    check(q, k, v, make((3, 1, 7)))
    check(q, k, v, make((2, 3, 5, 7)), is_causal=False)


def test_bfloat16():
    q, k, v = make((2, 2, 6, 8)), make((2, 2, 6, 8)), make((2, 2, 6, 8))
    check(q, k, v, dtype=torch.bfloat16, is_causal=True)


def test_one_program_each_way():
    q, k, v = (make((2, 3, 5, 8)).to(TPU).requires_grad_() for _ in range(3))
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.tpu.synchronize()
    assert torch_tpu.metrics.snapshot()["executions"] == 1
    grad = torch.ones_like(out)
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    out.backward(grad)
    torch.tpu.synchronize()
    assert torch_tpu.metrics.snapshot()["executions"] == 1
    assert "host read" not in torch_tpu.metrics.snapshot()["sync_reasons"]  # no read inside attention


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_is_one_program_each_way_and_matches_the_cpu(causal):
    # Six query heads over two key/value heads: each key/value head serves three query heads.
    q, k, v = make((2, 6, 5, 8), seed=1), make((2, 2, 7, 8), seed=2), make((2, 2, 7, 8), seed=3)
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    tpu = [t.to(TPU).requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*cpu, is_causal=causal, enable_gqa=True)
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    actual = F.scaled_dot_product_attention(*tpu, is_causal=causal, enable_gqa=True)
    torch.tpu.synchronize()
    assert torch_tpu.metrics.snapshot()["executions"] == 1
    assert_close(actual, expected, **TOL)
    grad = make(tuple(expected.shape), seed=4)
    expected.backward(grad)
    actual.backward(grad.to(TPU))
    for name, device_input, cpu_input in zip("qkv", tpu, cpu, strict=False):
        assert device_input.grad.shape == cpu_input.grad.shape, name
        assert_close(device_input.grad, cpu_input.grad, **TOL)


def test_grouped_query_attention_errors_and_dropout_match_the_cpu():
    q, k, v = make((2, 4, 5, 8)), make((2, 3, 5, 8)), make((2, 3, 5, 8))
    raises_like_cpu(lambda device: F.scaled_dot_product_attention(*(t.to(device) for t in (q, k, v)), enable_gqa=True))
    torch.manual_seed(0)
    dropped = F.scaled_dot_product_attention(q.to(TPU), q.to(TPU), q.to(TPU), dropout_p=0.5)
    assert dropped.shape == q.shape and torch.isfinite(dropped.cpu()).all()


def test_errors_match_the_cpu():
    q, k = make((2, 3, 5, 8)), make((2, 3, 7, 6))
    with pytest.raises(RuntimeError) as cpu_error:
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError) as tpu_error:
        F.scaled_dot_product_attention(q.to(TPU), k.to(TPU), k.to(TPU))  # at this line in every mode
    assert type(tpu_error.value) is type(cpu_error.value)
    assert str(tpu_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("bias", [False, True])
def test_backward_meta_for_older_torch_matches_pytorchs(bias):
    """torch_tpu registers a meta function for the backward op where torch (2.11) has none; it
    must give the outputs PyTorch's own (2.13's) gives: sizes, strides and dtypes."""
    from torch_tpu._attention import _attention_backward_meta

    query = torch.empty(2, 6, 4, 8, device="meta").transpose(1, 2)  # (2, 4, 6, 8), heads-major
    key = torch.empty(2, 4, 5, 8, device="meta", dtype=query.dtype)
    value = torch.empty(2, 4, 5, 3, device="meta")
    attn_bias = torch.empty(2, 4, 6, 5, device="meta") if bias else None
    out = torch.empty(2, 4, 6, 3, device="meta")
    logsumexp = torch.empty(2, 4, 6, device="meta")
    seed = torch.empty((), dtype=torch.int64, device="meta")
    args = (out, query, key, value, attn_bias, [True, True, True, bias], out, logsumexp, seed, seed, 6, 5, 0.0, False)
    args += (seed, seed)
    ours = _attention_backward_meta(*args, scale=None)
    theirs = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(*args, scale=None)
    for mine, reference in zip(ours, theirs, strict=True):
        if reference is None:
            assert mine is None
        else:
            assert (mine.shape, mine.stride(), mine.dtype) == (reference.shape, reference.stride(), reference.dtype)
