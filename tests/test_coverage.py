"""The training issue's op list in one place: every layer, pooling, activation, loss, attention,
indexing and manipulation op it names runs forward and backward on tpu with no CPU fallback,
and its output and input gradients match the CPU's. (Each family's own test file covers dtypes,
options and error paths in depth; this file is the checklist.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, make
from torch import nn

import torch_tpu
from torch_tpu import _C


def image(*shape):
    return make(shape, low=-2.0, high=2.0)


def probabilities(*shape):
    return make(shape, low=0.05, high=0.95)


def labels(*shape, classes=5):
    return make(shape, torch.int64, low=0, high=classes)


def constant(tensor):
    """Marks a float input that must not require grad (e.g. class weights)."""
    tensor.constant = True
    return tensor


# name -> (fn(*tensors) -> tensor, input builders). Float inputs get requires_grad. A module is
# built fresh (seeded) on each side, so its parameters start equal and their grads are compared.
MODULES = {
    "Linear": (lambda: nn.Linear(6, 4), [lambda: image(3, 6)]),
    "Conv1d": (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), [lambda: image(2, 4, 11)]),
    "Conv2d": (lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2), [lambda: image(2, 4, 9, 9)]),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1), [lambda: image(2, 4, 5, 5)]),
    "BatchNorm1d": (lambda: nn.BatchNorm1d(5), [lambda: image(8, 5)]),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3), [lambda: image(4, 3, 5, 5)]),
    "BatchNorm2d eval": (lambda: nn.BatchNorm2d(3).eval(), [lambda: image(4, 3, 5, 5)]),
    "LayerNorm": (lambda: nn.LayerNorm(8), [lambda: image(3, 4, 8)]),
    "GroupNorm": (lambda: nn.GroupNorm(2, 4), [lambda: image(3, 4, 5)]),
    "RMSNorm": (lambda: nn.RMSNorm(8), [lambda: image(3, 4, 8)]),
    "MaxPool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1), [lambda: image(2, 3, 8, 8)]),
    "AvgPool2d": (lambda: nn.AvgPool2d(2), [lambda: image(2, 3, 8, 8)]),
    "AdaptiveAvgPool2d": (lambda: nn.AdaptiveAvgPool2d((3, 2)), [lambda: image(2, 3, 7, 8)]),
}
for activation in ["ReLU", "SiLU", "Softplus", "LeakyReLU", "ELU", "Hardswish", "Mish", "Tanh", "Sigmoid"]:
    MODULES[activation] = (getattr(nn, activation), [lambda: image(4, 7)])
MODULES["GELU"] = (nn.GELU, [lambda: image(4, 7)])
MODULES["GELU tanh"] = (lambda: nn.GELU(approximate="tanh"), [lambda: image(4, 7)])

FUNCTIONS = {
    "Embedding padding_idx": (
        lambda w, i: F.embedding(i, w, padding_idx=1),
        [lambda: image(6, 3), lambda: labels(4, 5, classes=6)],
    ),
    "Dropout p=0 and eval": (lambda x: F.dropout(x, 0.0) + F.dropout(x, 0.5, training=False), [lambda: image(5)]),
    "cross_entropy ignore_index": (
        lambda x, t: F.cross_entropy(x, t, ignore_index=2),
        [lambda: image(6, 5), lambda: labels(6)],
    ),
    "cross_entropy label_smoothing + weight": (
        lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
        [lambda: image(6, 5), lambda: labels(6), lambda: constant(probabilities(5))],
    ),
    "cross_entropy probability targets": (
        lambda x, p: F.cross_entropy(x, p.softmax(-1)),
        [lambda: image(6, 5), lambda: image(6, 5)],
    ),
    "nll_loss": (lambda x, t: F.nll_loss(x.log_softmax(-1), t), [lambda: image(6, 5), lambda: labels(6)]),
    "mse_loss": (F.mse_loss, [lambda: image(4, 3), lambda: image(4, 3)]),
    "l1_loss": (F.l1_loss, [lambda: image(4, 3), lambda: image(4, 3)]),
    "smooth_l1_loss": (F.smooth_l1_loss, [lambda: image(4, 3), lambda: image(4, 3)]),
    "binary_cross_entropy": (F.binary_cross_entropy, [lambda: probabilities(4, 3), lambda: probabilities(4, 3)]),
    "binary_cross_entropy_with_logits": (
        F.binary_cross_entropy_with_logits,
        [lambda: image(4, 3), lambda: probabilities(4, 3)],
    ),
    "kl_div": (
        lambda x, t: F.kl_div(x.log_softmax(-1), t.softmax(-1), reduction="batchmean"),
        [lambda: image(4, 5), lambda: image(4, 5)],
    ),
    "sdpa attn_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [lambda: image(2, 2, 5, 4), lambda: image(2, 2, 6, 4), lambda: image(2, 2, 6, 4), lambda: image(5, 6)],
    ),
    "sdpa is_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [lambda: image(2, 2, 5, 4), lambda: image(2, 2, 5, 4), lambda: image(2, 2, 5, 4)],
    ),
    "index": (lambda x, i: x[i, 1:], [lambda: image(5, 4), lambda: labels(3)]),
    "index_put accumulate": (
        lambda x, v, i: x.index_put((i,), v, accumulate=True),
        [lambda: image(5, 4), lambda: image(6, 4), lambda: labels(6)],
    ),
    "scatter": (lambda x, s, i: x.scatter(0, i, s), [lambda: image(5, 3), lambda: image(2, 3), lambda: labels(2, 3)]),
    "scatter_add": (
        lambda x, s, i: x.scatter_add(0, i, s),
        [lambda: image(5, 3), lambda: image(4, 3), lambda: labels(4, 3)],
    ),
    "scatter_reduce amax": (
        lambda x, s, i: x.scatter_reduce(0, i, s, "amax"),
        [lambda: image(5, 3), lambda: image(4, 3), lambda: labels(4, 3)],
    ),
    "gather": (lambda x, i: x.gather(1, i), [lambda: image(4, 5), lambda: labels(4, 2)]),
    "masked_fill": (lambda x, m: x.masked_fill(m, 0.5), [lambda: image(4, 5), lambda: make((4, 5), torch.bool)]),
    "masked_select": (lambda x, m: x.masked_select(m), [lambda: image(4, 5), lambda: make((4, 5), torch.bool)]),
    "nonzero": (lambda x: x * x.nonzero().sum(), [lambda: image(4, 5)]),
    "cat stack split chunk": (
        lambda a, b: torch.stack([torch.cat([a, b]).split(3)[0], torch.cat([b, a]).chunk(2)[1][:3]]),
        [lambda: image(3, 4), lambda: image(3, 4)],
    ),
    "flip roll repeat tile": (
        lambda x: x.flip(0).roll(1, 1).repeat(2, 1) + x.tile(2, 1),
        [lambda: image(3, 4)],
    ),
    "pad constant reflect replicate": (
        lambda x: F.pad(x, (1, 2), value=0.5).sum()
        + F.pad(x, (1, 2, 2, 1), mode="reflect").sum()
        + F.pad(x, (2, 1, 1, 2), mode="replicate").sum(),
        [lambda: image(2, 3, 4, 5)],
    ),
    "triu tril": (lambda x: x.triu(1) + x.tril(-1), [lambda: image(4, 5)]),
    "sort argsort topk": (
        lambda x: x.sort(1)[0] * x.argsort(0) + x.topk(2, 1)[0].sum(),
        [lambda: image(4, 5)],
    ),
    "cumsum cumprod": (lambda x: x.cumsum(1) + x.cumprod(0), [lambda: image(4, 5)]),
    "interpolate nearest bilinear": (
        lambda x: F.interpolate(x, scale_factor=2).sum() + F.interpolate(x, size=(5, 7), mode="bilinear").sum(),
        [lambda: image(2, 3, 4, 4)],
    ),
}


def run(fn, inputs, device):
    tensors = [t.to(device).requires_grad_(t.is_floating_point() and not hasattr(t, "constant")) for t in inputs]
    out = fn(*tensors)
    out.backward(torch.ones_like(out))
    return out.detach().cpu(), [t.grad.cpu() for t in tensors if t.requires_grad]


def compare(fn_for_device, builders):
    inputs = [build() for build in builders]
    torch_tpu.metrics.reset()
    got_out, got_grads = fn_for_device(TPU, inputs)
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0
    expected_out, expected_grads = fn_for_device(torch.device("cpu"), inputs)
    torch.testing.assert_close(got_out, expected_out, rtol=1e-4, atol=1e-5)
    assert len(got_grads) == len(expected_grads)
    for got, expected in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(MODULES))
def test_module_forward_backward(name):
    build_module, builders = MODULES[name]

    def on(device, inputs):
        torch.manual_seed(0)
        module = build_module().to(device)
        out, input_grads = run(module, inputs, device)
        return out, input_grads + [p.grad.cpu() for p in module.parameters()]

    compare(on, builders)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_function_forward_backward(name):
    fn, builders = FUNCTIONS[name]
    compare(lambda device, inputs: run(fn, inputs, device), builders)


def test_at_least_250_ops_are_lowered():
    # Each lowering serves an ATen op's functional, in-place and out= forms.
    names = _C._registered_lowerings()
    assert len(names) == len(set(names))
    assert len(names) >= 250, len(names)
