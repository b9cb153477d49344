"""Custom kernels: the per-call cost of a JAX-defined RMSNorm against the same math in PyTorch
ops, in strict and fused eager mode, and the first call's export and compile time.

    .venv/bin/python benchmarks/bench_kernels.py [--repeats 20] [--calls 100] [--rows 64] [--width 512]

Per call, in each mode: the host time to issue it (record it, or launch its program), one call
and the wait for its result (latency), and 100 chained calls with one host read at the end,
divided by 100 (strict: 100 launches of the kernel's program, against 6 per call for the PyTorch
ops; fused: the calls recorded and cut into programs at loop boundaries). First call: jax.export of the kernel for a new input signature, then
the compile of the program that embeds it (a cold compile cache), then both again from the caches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="bench_kernels_"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu import kernels  # noqa: E402
from torch_tpu.kernels import _jax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_seconds  # noqa: E402


def rmsnorm_jax(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * w


rmsnorm = kernels.jax(rmsnorm_jax)


def torch_rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


def chained(fn, x, w, calls):
    y = x
    for _ in range(calls):
        y = fn(y, w)
    return y


def per_call(fn, x, w, mode, calls, repeats):
    """Seconds per call: issuing it (host time, no wait), one call and the wait for its result
    (latency), and `calls` chained calls with one host read at the end (throughput)."""
    sync = torch.tpu.synchronize
    with torch_tpu.execution_mode(mode):
        latency = median_seconds(lambda: fn(x, w), sync, repeats)
        throughput = median_seconds(lambda: chained(fn, x, w, calls).sum().item(), sync, repeats) / calls
        issue = []
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            outputs = [fn(x, w) for _ in range(calls)]
            issue.append((time.perf_counter() - start) / calls)
            del outputs
        sync()
    return statistics.median(issue), latency, throughput


def first_call(rows, width):
    """(export seconds, compile seconds, cached first call seconds) for a signature not seen yet."""
    x, w = torch.randn(rows + 1, width).to("tpu"), torch.randn(width).to("tpu")
    start = time.perf_counter()
    _jax._export("bench::rmsnorm", rmsnorm_jax, [x, w])
    export = time.perf_counter() - start
    before = torch_tpu.metrics.snapshot()
    rmsnorm(x, w).cpu()  # exports again (the op's own cache), compiles its program, runs it
    compile_seconds = torch_tpu.metrics.snapshot()["compile_time_s"] - before["compile_time_s"]
    start = time.perf_counter()
    rmsnorm(x, w).cpu()
    return export, compile_seconds, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    print(f"platform: {torch_tpu.platform()}, jax {jax.__version__}, RMSNorm of [{args.rows}, {args.width}] f32")
    x, w = torch.randn(args.rows, args.width).to("tpu"), torch.randn(args.width).to("tpu")
    export, compile_seconds, cached = first_call(args.rows, args.width)
    print(
        f"first call: jax.export {export * 1e3:.1f} ms, compile {compile_seconds * 1e3:.1f} ms; later call {cached * 1e3:.2f} ms"
    )
    print(f"{'per call':24}{'issue':>10}{'latency':>10}{'of ' + str(args.calls) + ' chained':>16}")
    for mode in ("strict", "fused"):
        for label, fn in (("jax kernel", rmsnorm), ("pytorch ops", torch_rmsnorm)):
            issue, latency, each = per_call(fn, x, w, mode, args.calls, args.repeats)
            print(f"{mode + ' ' + label:24}{issue * 1e6:>7.0f} us{latency * 1e6:>7.0f} us{each * 1e6:>13.0f} us")


if __name__ == "__main__":
    main()
