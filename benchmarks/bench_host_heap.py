"""What keeping the malloc heap (csrc/runtime/host_heap.h) saves on the CPU plugin: a strict-mode
training step in fresh processes with the heap kept (the default) and with
TORCH_TPU_KEEP_HOST_HEAP=0 (glibc's own trimming), taking turns.

    .venv/bin/python benchmarks/bench_host_heap.py [--workload train_gpt2] [--steps 60] [--rounds 3]

Workloads are bench_modes.py's builders (train_lm, train_gpt2, mlp_step). Each process reports
its median step time, its CPU time per step and the page faults per step (getrusage's minor
faults) over the timed steps; the table gives the medians over the rounds and their ratios.
The effect shows in a fresh process: one that has already freed large blocks (bench_modes.py's
native CPU runs, say) has raised glibc's trim threshold itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def child(workload: str, steps: int, mode: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_modes

    build = getattr(bench_modes, workload)()
    figures = bench_modes.measure(build, mode, steps, warmup=5)
    print(
        json.dumps(
            {"ms": figures["time"] * 1e3, "cpu_ms": figures["cpu_per_step"] * 1e3, "faults": figures["faults_per_step"]}
        )
    )


def run_child(workload: str, steps: int, mode: str, keep: bool) -> dict:
    env = dict(os.environ, TORCH_TPU_KEEP_HOST_HEAP="1" if keep else "0")
    command = [sys.executable, __file__, "--child", "--workload", workload, "--steps", str(steps), "--mode", mode]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="train_gpt2")
    parser.add_argument("--mode", default="strict", choices=("strict", "defer_and_fuse", "compiled"))
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.workload, args.steps, args.mode)
        return
    runs = {True: [], False: []}
    for _ in range(args.rounds):
        for keep in (False, True):
            runs[keep].append(run_child(args.workload, args.steps, args.mode, keep))
    print(f"{args.workload}, {args.mode}, {args.steps} steps per process, medians of {args.rounds} processes each")
    print(f"{'heap':<26} {'step ms':>8} {'cpu ms/step':>12} {'faults/step':>12}")
    medians = {}
    for keep, label in ((False, "TORCH_TPU_KEEP_HOST_HEAP=0"), (True, "kept (default)")):
        medians[keep] = {k: statistics.median(r[k] for r in runs[keep]) for k in ("ms", "cpu_ms", "faults")}
        m = medians[keep]
        print(f"{label:<26} {m['ms']:>8.1f} {m['cpu_ms']:>12.1f} {m['faults']:>12.0f}")
    print(
        f"kept/trimmed: step {medians[True]['ms'] / medians[False]['ms']:.2f}, "
        f"cpu {medians[True]['cpu_ms'] / medians[False]['cpu_ms']:.2f}"
    )


if __name__ == "__main__":
    main()
