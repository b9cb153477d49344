"""A first check of torch_tpu on another PJRT plugin (XLA's CUDA plugin on an NVIDIA machine):
what the device is, whether the precision modes give the same products as on the CPU plugin,
a small training run against the CPU, and matmul throughput against the machine's own torch
device. Run by tools/device_check.sh; prints one line per check and never stops at the first
failure."""

from __future__ import annotations

import json
import sys
import time
import traceback

import torch
from torch import nn

import torch_tpu
from torch_tpu.precision import Precision, precision

RESULTS: dict[str, object] = {}


def check(name):
    def wrap(fn):
        start = time.perf_counter()
        try:
            RESULTS[name] = fn()
            status = "ok"
        except Exception as error:  # a smoke run reports every failure, then goes on
            RESULTS[name] = f"FAILED: {type(error).__name__}: {str(error)[:600]}"
            traceback.print_exc()
            status = "FAILED"
        print(f"[{status}] {name} ({time.perf_counter() - start:.1f} s): {RESULTS[name]}", flush=True)
        return fn

    return wrap


@check("device")
def _device():
    x = torch.arange(6.0, device="tpu").reshape(2, 3)
    return {
        "platform": torch_tpu.platform(),
        "devices": torch.tpu.device_count(),
        "name": torch.tpu.get_device_name(0),
        "arange_sum": float((x * 2).sum()),
    }


@check("precision modes: relative error of a 512x512 f32 product")
def _precision():
    """DEFAULT must round operands to bf16 and accumulate in f32 (as on the CPU plugin), HIGHEST
    must be f32 (no TF32): each is compared with its emulation on the CPU."""
    torch.manual_seed(0)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    exact = a.double() @ b.double()
    bf16_operands = (a.bfloat16().double() @ b.bfloat16().double()).float()
    out = {}
    for mode in (Precision.DEFAULT, Precision.HIGH, Precision.HIGHEST):
        with precision(mode):
            got = (a.to("tpu") @ b.to("tpu")).cpu().double()
        out[mode.name] = {
            "vs_f64": float((got - exact).norm() / exact.norm()),
            "vs_bf16_operands_f32_accumulation": float((got - bf16_operands.double()).norm() / exact.norm()),
        }
    out["cpu_f32_vs_f64"] = float(((a @ b).double() - exact).norm() / exact.norm())
    return out


@check("CNN training, 5 SGD steps, max parameter difference from the CPU")
def _train():
    def build():
        torch.manual_seed(1)
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(8 * 8 * 8, 10),
        )

    data = torch.randn(16, 3, 16, 16)
    target = torch.randint(0, 10, (16,))
    models = {}
    with precision(Precision.HIGHEST):
        for device in ("cpu", "tpu"):
            model = build().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            for _ in range(5):
                loss = nn.functional.cross_entropy(model(data.to(device)), target.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            models[device] = (model, float(loss))
    diff = max(
        float((p.cpu() - q).abs().max())
        for p, q in zip(models["tpu"][0].state_dict().values(), models["cpu"][0].state_dict().values(), strict=True)
        if p.is_floating_point()
    )
    return {"max_param_diff": diff, "loss_tpu": models["tpu"][1], "loss_cpu": models["cpu"][1]}


@check("modes: strict, fused and compiled give the same MLP output")
def _modes():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10)).to("tpu")
    x = torch.randn(32, 64, device="tpu")
    strict = model(x).cpu()
    with torch_tpu.execution_mode("defer_and_fuse"):
        fused = model(x).cpu()
    compiled = torch.compile(model, backend="tpu")(x).cpu()
    reference = model.cpu()(x.cpu())
    return {
        "fused_vs_strict": float((fused - strict).abs().max()),
        "compiled_vs_strict": float((compiled - strict).abs().max()),
        "strict_vs_cpu": float((strict - reference).abs().max()),
    }


@check("attention training step: loss and gradient difference from the CPU")
def _attention():
    """scaled_dot_product_attention forward and backward (torch 2.11 lacked the backward's meta
    function), under HIGHEST so the comparison is f32 against f32."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    grads = {}
    with precision(Precision.HIGHEST):
        for device in ("cpu", "tpu"):
            inputs = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
            loss = nn.functional.scaled_dot_product_attention(*inputs, is_causal=True).square().sum()
            loss.backward()
            grads[device] = [float(loss)] + [t.grad.cpu() for t in inputs]
    return {
        "loss_diff": abs(grads["tpu"][0] - grads["cpu"][0]),
        "max_grad_diff": max(
            float((a - b).abs().max()) for a, b in zip(grads["tpu"][1:], grads["cpu"][1:], strict=True)
        ),
    }


@check("fused 150-op elementwise chain: compile seconds of its one program")
def _chain_compile():
    """The chain bench_modes times, from a cold cache: XLA's GPU compile took 43 s for it once."""
    x = torch.rand(256, 256, device="tpu")
    torch_tpu.metrics.reset()
    with torch_tpu.execution_mode("defer_and_fuse"):
        y = x
        for i in range(75):
            y = y * 0.999 if i % 2 else y + 0.001
            y = torch.sin(y) if i % 3 == 0 else y - 0.0005
        y.sum().item()
    figures = torch_tpu.metrics.snapshot()
    return {"compiles": figures["compiles"], "compile_time_s": round(figures["compile_time_s"], 2)}


def _tflops(device: str, n: int, dtype, sync) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        c = a @ b
    sync()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            c = a @ b
        sync()
        times.append((time.perf_counter() - start) / 10)
    del c
    return 2 * n**3 / sorted(times)[len(times) // 2] / 1e12


@check("bf16 n^3 matmul TFLOP/s: tpu (PJRT plugin) vs the machine's own torch device")
def _matmul():
    # 8192 fills a GPU; on a CPU-only machine (the script's own check) a smaller size is enough.
    n = 8192 if torch.cuda.is_available() else 1024
    # Strict: in fused mode the products nobody reads are never run, so only the last would count.
    with torch_tpu.execution_mode("strict"):
        out = {"n": n, "tpu": _tflops("tpu", n, torch.bfloat16, torch.tpu.synchronize)}
    if torch.cuda.is_available():
        out["cuda"] = _tflops("cuda", n, torch.bfloat16, torch.cuda.synchronize)
    return out


def _add_loop():
    x = torch.ones(16, device="tpu")
    for _ in range(20):
        x = x + 1
    torch.tpu.synchronize()
    start = time.perf_counter()
    for _ in range(1000):
        x = x + 1
    torch.tpu.synchronize()
    return (time.perf_counter() - start) * 1e3


@check("strict eager op rate: 1000 small adds, us per op")
def _op_rate():
    with torch_tpu.execution_mode("strict"):
        return _add_loop()


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else None
    if path:
        with open(path, "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)
    failed = [k for k, v in RESULTS.items() if isinstance(v, str) and v.startswith("FAILED")]
    print(f"{len(RESULTS) - len(failed)} of {len(RESULTS)} checks ran; failed: {failed}")
