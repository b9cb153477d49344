"""Recording cost of the batched (_foreach_*) ops an optimizer step uses, per tensor, in fused
mode, and the main thread's CPU time of a whole AdamW step, tpu against native CPU torch.

    .venv/bin/python benchmarks/bench_foreach.py [--rounds 7]

The tensors are the MLP's eight parameters (bench_mlp_step.py). Recording: 40 calls in a row,
then one synchronize; the figure is the median over rounds of the wall time per call and tensor
(fused mode's loop and size cuts are turned off, so the 40 calls stay one pending program).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["TORCH_TPU_FUSE_MIN_LOOP_OPS"] = "1000000"
os.environ["TORCH_TPU_FUSE_MAX_OPS"] = "1000000"

import torch  # noqa: E402
from bench_mlp_step import mlp  # noqa: E402

import torch_tpu  # noqa: E402


def recording_per_tensor(fn, tensors, rounds, calls=40):
    figures = []
    for _ in range(rounds):
        torch.tpu.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        figures.append((time.perf_counter() - start) / calls / len(tensors))
    torch.tpu.synchronize()
    return statistics.median(figures)


def adamw_step_thread_time(device, steps=100):
    torch.manual_seed(0)
    model = mlp().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    total = 0.0
    for i in range(steps + 5):
        start = time.thread_time()
        optimizer.step()
        if i >= 5:
            total += time.thread_time() - start
        if device == "tpu":
            torch.tpu.synchronize()
    return total / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with torch_tpu.execution_mode("defer_and_fuse"):
        xs = [p.detach().to("tpu") for p in mlp().parameters()]
        ys = [torch.randn_like(x) for x in xs]
        positive = [y.abs() + 1 for y in ys]
        cases = {
            "_foreach_mul_(xs, 0.999)": lambda: torch._foreach_mul_(xs, 0.999),
            "_foreach_lerp_(xs, ys, 0.1)": lambda: torch._foreach_lerp_(xs, ys, 0.1),
            "_foreach_addcmul_(xs, ys, ys, value=0.001)": lambda: torch._foreach_addcmul_(xs, ys, ys, value=0.001),
            "_foreach_addcdiv_(xs, ys, zs, [0.001] * 8)": lambda: torch._foreach_addcdiv_(xs, ys, positive, [1e-3] * 8),
            "_foreach_sqrt(xs)": lambda: torch._foreach_sqrt(positive),
        }
        for name, fn in cases.items():
            print(f"{name:45} {recording_per_tensor(fn, xs, args.rounds) * 1e6:6.2f} us per tensor")
        tpu = adamw_step_thread_time("tpu")
    cpu = adamw_step_thread_time("cpu")
    print(
        f"AdamW step (8 tensors), main thread CPU: tpu fused {tpu * 1e6:.0f} us (recording only; "
        f"the device computes), native CPU {cpu * 1e6:.0f} us (computing)"
    )


if __name__ == "__main__":
    main()
