"""Reductions on XLA's CPU plugin: torch_tpu's default (YNNPACK reduction fusions) against XLA's own
reduction loops, with native CPU torch beside them, as medians. Each XLA setting runs in a child
process of its own (XLA reads XLA_FLAGS once, when the plugin starts), and the children take turns
for --rounds rounds, so that a drifting machine slows both alike.

    .venv/bin/python benchmarks/bench_reductions.py [--rounds 3] [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SETTINGS = {
    "default": None,
    "XLA's loops": "--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
}


def workloads(torch):
    x = torch.rand(2048, 2048)
    scores = torch.rand(32, 8, 64, 64)
    hidden = torch.rand(8 * 512, 768)
    norm = torch.nn.LayerNorm(768)
    return {
        "sum, 2048x2048": (lambda t: t.sum(), x),
        "row sums, 2048x2048": (lambda t: t.sum(1), x),
        "column sums, 2048x2048": (lambda t: t.sum(0), x),
        "amax, 2048x2048": (lambda t: t.amax(), x),
        "softmax, 32x8x64x64": (lambda t: t.softmax(-1), scores),
        "layer norm, 4096x768": (lambda t, norm=norm: norm.to(t.device)(t), hidden),
    }


def child(repeats: int) -> None:
    """Times each workload on tpu (strict) and, in the default setting's child, on the CPU."""
    import torch

    import torch_tpu

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _timing import median_seconds

    results = {}
    with torch.no_grad(), torch_tpu.execution_mode("strict"):
        for name, (fn, value) in workloads(torch).items():
            on_tpu = value.to("tpu")
            results[name] = {
                "tpu": median_seconds(lambda fn=fn, v=on_tpu: fn(v), torch.tpu.synchronize, repeats),
                "cpu": median_seconds(lambda fn=fn, v=value: fn(v), lambda: None, repeats),
            }
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.repeats)
    rounds = []
    for _ in range(args.rounds):
        row = {}
        for label, flags in SETTINGS.items():
            env = dict(os.environ, TORCH_TPU_CACHE_DIR=tempfile.mkdtemp(prefix="bench_reductions_"))
            env.pop("XLA_FLAGS", None)
            if flags:
                env["XLA_FLAGS"] = flags
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--repeats", str(args.repeats)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            row[label] = json.loads(out.stdout.strip().splitlines()[-1])
        rounds.append(row)
    names = list(rounds[0]["default"])
    print(f"{'workload':26} {'cpu ms':>8} {'default ms':>11} {'XLA loops ms':>13} {'loops/default':>14}")
    for name in names:

        def median(figure, name=name):
            return statistics.median(figure(row, name) for row in rounds)

        cpu = median(lambda row, n: row["default"][n]["cpu"])
        default = median(lambda row, n: row["default"][n]["tpu"])
        loops = median(lambda row, n: row["XLA's loops"][n]["tpu"])
        ratio = median(lambda row, n: row["XLA's loops"][n]["tpu"] / row["default"][n]["tpu"])
        print(f"{name:26} {cpu * 1e3:8.3f} {default * 1e3:11.3f} {loops * 1e3:13.3f} {ratio:14.2f}")
    print(f"(medians of {args.rounds} rounds; tpu in strict mode, one program per op)")


if __name__ == "__main__":
    main()
