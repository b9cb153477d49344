"""The host allocator's share of tpu's host-bound costs: glibc malloc against a preloaded
allocator (jemalloc by default), side by side in one run, as medians.

    .venv/bin/python benchmarks/bench_allocator.py [--preload /usr/lib/x86_64-linux-gnu/libjemalloc.so.2]
        [--rounds 2] [--seconds 2.5]

Each round runs one child process per allocator, in turn. A child measures the MLP training step
of bench_modes.py in strict and fused mode, and one call of a compiled graph over 100 0-d
arguments. It then runs the LM training step (strict, fused and compiled) for a while, as a
process that has run other work does, and measures the MLP step again. The preloaded allocator is
not installed by `make`: on Debian it is the package libjemalloc2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("mlp strict", "mlp fused", "100-arg call", "mlp strict after lm", "mlp fused after lm")


def child(seconds: float) -> dict[str, float]:
    import torch

    import torch_tpu

    sys.path.insert(0, HERE)
    import bench_modes

    def median_ms(fn, duration):
        for _ in range(5):
            fn()
        torch.tpu.synchronize()
        samples, start = [], time.perf_counter()
        while time.perf_counter() - start < duration:
            begin = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - begin)
        torch.tpu.synchronize()
        return statistics.median(samples) * 1e3

    def mlp_steps(figures, suffix):
        for mode, name in (("strict", "mlp strict"), ("defer_and_fuse", "mlp fused")):
            with torch_tpu.execution_mode(mode):
                figures[name + suffix] = median_ms(bench_modes.mlp_step()("tpu", False), seconds)

    figures: dict[str, float] = {}
    mlp_steps(figures, "")
    inputs = [torch.zeros((), device="tpu") for _ in range(100)]
    add_one = torch.compile(lambda *xs: [x + 1 for x in xs], backend="tpu")
    figures["100-arg call"] = median_ms(lambda: add_one(*inputs), seconds) * 1e3  # us
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.execution_mode(mode):
            median_ms(bench_modes.train_lm()("tpu", False), seconds)
    median_ms(bench_modes.train_lm()("tpu", True), seconds)
    mlp_steps(figures, " after lm")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preload", default="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.seconds)))
        return 0
    if not os.path.exists(args.preload):
        print(f"bench_allocator: {args.preload} does not exist; install it (Debian: libjemalloc2) or pass --preload")
        return 2
    configs = {"glibc": {}, os.path.basename(args.preload): {"LD_PRELOAD": args.preload}}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    cache = tempfile.mkdtemp(prefix="bench_allocator_")
    for _ in range(args.rounds):
        for name, extra in configs.items():
            env = {**os.environ, **extra, "TORCH_TPU_CACHE_DIR": cache}
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--child", "--seconds", str(args.seconds)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    names = list(configs)
    print(f"{'':24}" + "".join(f"{name:>20}" for name in names) + f"{'ratio':>10}")
    for figure in FIGURES:
        medians = [statistics.median(r[figure] for r in results[name]) for name in names]
        unit = "us" if figure.endswith("call") else "ms"
        cells = "".join(f"{m:>17.2f} {unit}" for m in medians)
        print(f"{figure:24}{cells}{medians[1] / medians[0]:>10.2f}")
    print(f"(medians of {args.rounds} rounds; ratio = {names[1]} / glibc)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
