"""Three custom kernels in a small model that trains on tpu:

- a fused RMSNorm written in JAX (``@torch_tpu.kernels.jax``; its backward is ``jax.vjp``),
- a Pallas elementwise kernel, swish, with a Pallas backward through ``jax.custom_vjp``
  (interpreted on the CPU plugin, a Mosaic kernel on TPU),
- a mean-squared-error loss written in StableHLO (``torch_tpu.kernels.stablehlo``), with a
  StableHLO backward; its text is generated for each batch shape.

    .venv/bin/python examples/custom_kernel.py [--mode strict|fused|compiled] [--steps 60]

Each step's first loss is checked against the same model in PyTorch ops on the CPU; the kernels
live inside the step's programs, so fused and compiled modes run the same few programs a step as
the model would without them.
"""

from __future__ import annotations

import argparse
import contextlib

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl
from torch import nn

import torch_tpu
from torch_tpu import kernels

# ---- 1. RMSNorm in JAX: one kernel for the whole normalization, forward and backward ----


@kernels.jax
def rms_norm(x, weight, eps: float = 1e-6):
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 * scale).astype(x.dtype) * weight


# ---- 2. Swish in Pallas: row blocks over a grid, with a Pallas backward ----


def _swish_block(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.nn.sigmoid(x)


def _swish_grad_block(x_ref, g_ref, o_ref):
    x = x_ref[...]
    s = jax.nn.sigmoid(x)
    o_ref[...] = g_ref[...] * s * (1 + x * (1 - s))


def _by_row_blocks(block, x, *operands, rows=8):
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // rows,),
        in_specs=[spec] * (1 + len(operands)),
        out_specs=spec,
    )(x, *operands)


@jax.custom_vjp
def _swish(x):
    return _by_row_blocks(_swish_block, x)


_swish.defvjp(lambda x: (_by_row_blocks(_swish_block, x), x), lambda x, g: (_by_row_blocks(_swish_grad_block, x, g),))
swish = kernels.jax(_swish, name="example::swish")

# ---- 3. Mean squared error in StableHLO, generated per shape, with a StableHLO backward ----


def _type(shape) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


def _mse_text(prediction, target) -> str:
    t, n = _type(prediction.shape), prediction.numel()
    return f"""
    func.func @main(%p: {t}, %t: {t}) -> tensor<f32> {{
      %d = stablehlo.subtract %p, %t : {t}
      %s = stablehlo.multiply %d, %d : {t}
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %sum = stablehlo.reduce(%s init: %zero) applies stablehlo.add across dimensions = [0, 1] : ({t}, tensor<f32>) -> tensor<f32>
      %n = stablehlo.constant dense<{float(n)}> : tensor<f32>
      %mean = stablehlo.divide %sum, %n : tensor<f32>
      return %mean : tensor<f32>
    }}"""


def _mse_grad_text(prediction, target, grad) -> str:
    t, n = _type(prediction.shape), prediction.numel()
    return f"""
    func.func @main(%p: {t}, %t: {t}, %g: tensor<f32>) -> ({t}, {t}) {{
      %d = stablehlo.subtract %p, %t : {t}
      %scale = stablehlo.constant dense<{2.0 / n!r}> : tensor<f32>
      %k = stablehlo.multiply %g, %scale : tensor<f32>
      %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> {t}
      %dp = stablehlo.multiply %d, %kb : {t}
      %dt = stablehlo.negate %dp : {t}
      return %dp, %dt : {t}, {t}
    }}"""


mse_grad = kernels.stablehlo(
    _mse_grad_text,
    name="example::mse_grad",
    shape_fn=lambda p, t, g: (torch.empty_like(p), torch.empty_like(t)),
    num_outputs=2,
)
mse = kernels.stablehlo(
    _mse_text, name="example::mse", shape_fn=lambda p, t: p.new_empty(()), backward=lambda p, t, g: mse_grad(p, t, g)
)

# ---- The model, and the same model in PyTorch ops for the check ----


class KernelNet(nn.Module):
    def __init__(self, features=16, hidden=64, use_kernels=True):
        super().__init__()
        self.use_kernels = use_kernels
        self.up = nn.Linear(features, hidden)
        self.norm = nn.Parameter(torch.ones(hidden))
        self.down = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.up(x)
        if self.use_kernels:
            return self.down(swish(rms_norm(h, self.norm)))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        return self.down(h * torch.sigmoid(h))

    def loss(self, x, y):
        prediction = self(x)
        return mse(prediction, y) if self.use_kernels else ((prediction - y) ** 2).mean()


def dataset(batches=4, batch=32, features=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    xs = torch.randn(batches, batch, features, generator=generator)
    ys = torch.sin(xs.sum(-1, keepdim=True)) + 0.1 * xs[..., :1] ** 2
    return list(zip(xs, ys, strict=True))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["strict", "fused", "compiled"], default="strict")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    print(f"tpu backed by {torch_tpu.platform()}; jax {jax.__version__}; mode {args.mode}")
    # f32 matmuls, so the first loss can be checked closely against the CPU's (the default mode
    # multiplies bf16 operands, as a TPU does).
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    model = KernelNet()
    reference = KernelNet(use_kernels=False)
    reference.load_state_dict(model.state_dict())
    model.to("tpu")
    data = dataset()
    x0, y0 = data[0]
    expected = reference.loss(x0, y0).item()

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_of = torch.compile(model.loss, backend="tpu") if args.mode == "compiled" else model.loss
    mode = torch_tpu.execution_mode("fused") if args.mode == "fused" else contextlib.nullcontext()
    losses = []
    with mode:
        for step in range(args.steps):
            x, y = data[step % len(data)]
            before = torch_tpu.metrics.snapshot()["executions"]
            optimizer.zero_grad()
            loss = loss_of(x.to("tpu"), y.to("tpu"))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            programs = torch_tpu.metrics.snapshot()["executions"] - before
            if step == 0:
                print(f"first loss {losses[0]:.6f} (PyTorch ops on the CPU: {expected:.6f})")
                assert abs(losses[0] - expected) <= 1e-4 * max(1.0, abs(expected)), "the kernels disagree with PyTorch"
            if step % 10 == 0 or step == args.steps - 1:
                print(f"step {step:3d}  loss {losses[-1]:.5f}  programs this step {programs}")
    # Mean loss over a pass of the data, first pass against last.
    first, last = (sum(part) / len(part) for part in (losses[: len(data)], losses[-len(data) :]))
    print(f"mean loss over the data: first pass {first:.4f}, last pass {last:.4f}")
    assert args.steps < 2 * len(data) or last < 0.8 * first, "the model did not train"


if __name__ == "__main__":
    main()
