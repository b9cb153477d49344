"""The cost of each precision mode (DEFAULT, HIGH, HIGHEST) as a ratio to DEFAULT, for f32
matmuls and convolutions, with native CPU torch (f32) alongside, all in one run.

    .venv/bin/python benchmarks/bench_precision.py [--repeats 60] [--rounds 5]

Each sample is one warm product including the wait for its result. The modes take turns in
`rounds` rounds, so drift in the machine's load hits them alike; the median is over all rounds.
On a TPU, DEFAULT is one bf16 MXU pass, HIGH three and HIGHEST about six. Where the plugin has no
bf16 units (the CPU plugin), DEFAULT is emulated with casts and need not be the cheapest.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from _timing import sample_seconds

import torch_tpu

MODES = [torch_tpu.Precision.DEFAULT, torch_tpu.Precision.HIGH, torch_tpu.Precision.HIGHEST]


def conv_forward_backward(x, w):
    x.grad = w.grad = None
    F.conv2d(x, w, padding=1).sum().backward()
    return w.grad


CASES = {
    "mm 512x512": (lambda: (torch.randn(512, 512), torch.randn(512, 512)), torch.mm, False),
    "mm 1024x1024": (lambda: (torch.randn(1024, 1024), torch.randn(1024, 1024)), torch.mm, False),
    "bmm 16x128x128": (lambda: (torch.randn(16, 128, 128), torch.randn(16, 128, 128)), torch.bmm, False),
    "conv2d 8x64x32x32 3x3": (
        lambda: (torch.randn(8, 64, 32, 32), torch.randn(64, 64, 3, 3)),
        lambda x, w: F.conv2d(x, w, padding=1),
        False,
    ),
    "conv2d fwd+bwd": (
        lambda: (torch.randn(8, 64, 32, 32), torch.randn(64, 64, 3, 3)),
        conv_forward_backward,
        True,
    ),
}


def measure(repeats: int, rounds: int) -> None:
    per_round = max(repeats // rounds, 1)
    header = f"{'case':<24} {'cpu f32 (ms)':>12} {'DEFAULT (ms)':>12} {'HIGH/DEFAULT':>13} {'HIGHEST/DEFAULT':>16}"
    print(header)
    for name, (make_inputs, op, grads) in CASES.items():
        cpu_inputs = [t.requires_grad_(grads) for t in make_inputs()]
        tpu_inputs = [t.detach().to("tpu").requires_grad_(grads) for t in cpu_inputs]
        samples = {mode: [] for mode in MODES}
        cpu_samples = []
        for _ in range(rounds):
            cpu_samples += sample_seconds(lambda op=op, a=cpu_inputs: op(*a), lambda: None, per_round, warmup=2)
            for mode in MODES:
                with torch.tpu.precision(mode):
                    samples[mode] += sample_seconds(
                        lambda op=op, a=tpu_inputs: op(*a), torch.tpu.synchronize, per_round, warmup=2
                    )
        median = {mode: statistics.median(values) for mode, values in samples.items()}
        default = median[torch_tpu.Precision.DEFAULT]
        print(
            f"{name:<24} {statistics.median(cpu_samples) * 1e3:>12.3f} {default * 1e3:>12.3f} "
            f"{median[torch_tpu.Precision.HIGH] / default:>13.2f} "
            f"{median[torch_tpu.Precision.HIGHEST] / default:>16.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=60, help="samples per mode and case")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"torch {torch.__version__}; tpu backed by {torch_tpu.platform()}; threads {torch.get_num_threads()}")
    measure(args.repeats, args.rounds)


if __name__ == "__main__":
    main()
