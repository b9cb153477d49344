"""The host allocator's share of tpu's host-bound costs: glibc malloc against a preloaded
allocator (jemalloc by default), side by side in one run, as medians.

    .venv/bin/python benchmarks/bench_allocator.py [--preload /usr/lib/x86_64-linux-gnu/libjemalloc.so.2]
        [--rounds 2] [--repeats 300]

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

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("mlp strict", "mlp fused", "100-arg call", "mlp strict after lm", "mlp fused after lm")


def child(repeats: int) -> dict[str, float]:
    import torch

    import torch_tpu

    sys.path.insert(0, HERE)
    import bench_modes
    from _timing import median_seconds

    def step_ms(build):
        return median_seconds(build("tpu", False), torch.tpu.synchronize, repeats) * 1e3

    def mlp_steps(figures, suffix):
        for mode, name in (("strict", "mlp strict"), ("defer_and_fuse", "mlp fused")):
            with torch_tpu.execution_mode(mode):
                figures[name + suffix] = step_ms(bench_modes.mlp_step())

    figures: dict[str, float] = {}
    mlp_steps(figures, "")
    [(_, seconds, _, _)] = bench_modes.compiled_call_overhead(arg_counts=(100,))
    figures["100-arg call"] = seconds * 1e6
    for mode in ("strict", "defer_and_fuse"):
        with torch_tpu.execution_mode(mode):
            step_ms(bench_modes.train_lm())
    median_seconds(bench_modes.train_lm()("tpu", True), torch.tpu.synchronize, repeats)
    mlp_steps(figures, " after lm")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preload", default="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=300, help="timed steps per figure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.repeats)))
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
                [sys.executable, os.path.abspath(__file__), "--child", "--repeats", str(args.repeats)],
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
