"""scaled_dot_product_attention on tpu: PyTorch's overrideable fused-attention path.

``F.scaled_dot_product_attention`` asks the backend which implementation to use (the
``_fused_sdp_choice`` stub, csrc/aten/attention.cc). tpu answers OVERRIDEABLE, so attention is
``aten::_scaled_dot_product_fused_attention_overrideable``: one op (one program in strict mode,
with no host read) computed by ``tpu::scaled_dot_product_attention``, whose lowering keeps the
row log-sum-exp for the backward op (both in ``csrc/ops/attention.cc``). Grouped-query attention
(``enable_gqa``, fewer key/value heads) takes this path too; dropout takes PyTorch's math path.
"""

from __future__ import annotations

import math

import torch

_library = torch.library.Library("tpu", "FRAGMENT")
_library.define(
    "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, bool is_causal, "
    "float? scale) -> (Tensor, Tensor)"
)
_aten = torch.library.Library("aten", "IMPL")


def _like_query_layout(query, shape):
    """An empty tensor of `shape` whose dims are laid out in query's stride order, as PyTorch's meta
    function for the overrideable op allocates its output (compiled graphs depend on it)."""
    if tuple(query.shape) == tuple(shape):
        return torch.empty_like(query)
    order = sorted(range(query.dim()), key=lambda d: -query.stride(d))
    return query.new_empty([shape[d] for d in order]).permute([order.index(d) for d in range(query.dim())])


def _attention_meta(query, key, value, attn_bias, is_causal, scale):
    # The lowering contracts query with key over their last dim: checked here, at the call, with
    # the error of the CPU's math path (its batched matmul), rather than when the program compiles.
    torch._check(
        key.shape[-1] == query.shape[-1],
        lambda: f"Expected size for first two dimensions of batch2 tensor to be: "
        f"[{math.prod(query.shape[:-2])}, {query.shape[-1]}] but got: [{math.prod(key.shape[:-2])}, {key.shape[-1]}].",
    )
    output = _like_query_layout(query, (*query.shape[:-1], value.shape[-1]))
    # (B, H, L) as the overrideable op's meta function, B = 1 for 3-D inputs.
    batch = query.shape[0] if query.dim() == 4 else 1
    return output, query.new_empty((batch, query.shape[-3], query.shape[-2]), dtype=torch.float32)


def _fused_attention(
    query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, scale=None
):
    if dropout_p != 0.0:
        raise NotImplementedError("tpu's fused attention has no dropout; PyTorch's math path handles it")
    output, logsumexp = torch.ops.tpu.scaled_dot_product_attention(query, key, value, attn_bias, is_causal, scale)
    # The varlen and dropout outputs (cum_seq_q/k, philox seed/offset, debug mask) are unused.
    unused = query.new_empty(0)
    seed = query.new_empty((), dtype=torch.int64)
    return output, logsumexp, unused, unused, query.shape[-2], key.shape[-2], seed, seed, unused


_library.impl("scaled_dot_product_attention", _attention_meta, "Meta")
_aten.impl("_scaled_dot_product_fused_attention_overrideable", _fused_attention, "PrivateUse1")


def _attention_backward_meta(
    grad_out,
    query,
    key,
    value,
    attn_bias,
    grad_input_mask,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    philox_seed,
    philox_offset,
    *,
    scale=None,
):
    """Each gradient is laid out as its input, as PyTorch's own meta function for this op does."""
    grad_bias = torch.empty_like(attn_bias) if attn_bias is not None else None
    return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), grad_bias


# torch 2.11 has no meta function for the backward op (2.13 has), and the fallback takes output
# shapes from one: without it every attention backward fails there.
_BACKWARD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"
if not torch._C._dispatch_has_kernel_for_dispatch_key(_BACKWARD, "Meta"):
    _aten.impl(_BACKWARD.removeprefix("aten::"), _attention_backward_meta, "Meta")
