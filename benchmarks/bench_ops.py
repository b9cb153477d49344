"""Per-op cost on tpu against native CPU torch, side by side in one run, and cold compile time.

    .venv/bin/python benchmarks/bench_ops.py [--repeats 200]

Warm: the median wall time of one op including the wait for its result (torch.tpu.synchronize),
so asynchronous launch does not flatter tpu. Cold: compile time per new op signature, from the
metrics, with the disk cache off and the memory cache cleared.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("TORCH_TPU_DISK_CACHE", "0")  # cold compiles must really compile

import torch  # noqa: E402
from _timing import median_seconds  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu import _C  # noqa: E402


def _matrices(*shapes):
    return lambda: tuple(torch.randn(*shape) for shape in shapes)


# The products in each operand layout (tpu in its DEFAULT precision mode: bf16 operands).
CASES = {
    "add 1k": (_matrices((1000,), (1000,)), torch.add),
    "mm 256x256": (_matrices((256, 256), (256, 256)), torch.mm),
    "x@w 1024": (_matrices((1024, 1024), (1024, 1024)), lambda a, b: a @ b),
    "x@w.T 1024": (_matrices((1024, 1024), (1024, 1024)), lambda a, b: a @ b.t()),
    "x.T@w 1024": (_matrices((1024, 1024), (1024, 1024)), lambda a, b: a.t() @ b),
    "q@k.mT 32x128x64": (_matrices((32, 128, 64), (32, 128, 64)), lambda q, k: q @ k.mT),
    # nn.Linear's x @ w.T with a small batch: the weight is the larger operand.
    "linear 64x512>256": (_matrices((64, 512), (256, 512)), torch.nn.functional.linear),
    "linear 64x256>512": (_matrices((64, 256), (512, 256)), torch.nn.functional.linear),
}


def warm(repeats: int) -> None:
    print(f"{'op':<18} {'cpu (us)':>10} {'tpu (us)':>10} {'tpu/cpu':>8}")
    for name, (make_inputs, op) in CASES.items():
        cpu_inputs = make_inputs()
        tpu_inputs = [t.to("tpu") for t in cpu_inputs]
        cpu = median_seconds(lambda op=op, a=cpu_inputs: op(*a), lambda: None, repeats)
        tpu = median_seconds(lambda op=op, a=tpu_inputs: op(*a), torch.tpu.synchronize, repeats)
        print(f"{name:<18} {cpu * 1e6:>10.1f} {tpu * 1e6:>10.1f} {tpu / cpu:>8.2f}")


def cold() -> None:
    signatures = {
        "add": lambda x: x + x,
        "mul scalar": lambda x: x * 3.0,
        "sum dim": lambda x: x.sum(0),
        "mm": lambda x: x @ x,
        "softmax": lambda x: x.softmax(-1),
        "transpose+add": lambda x: x.t() + 1,
    }
    print(f"\n{'signature':<16} {'compile (ms)':>12}")
    times = []
    for name, fn in signatures.items():
        x = torch.randn(64, 64).to("tpu")
        _C._clear_memory_cache()
        torch_tpu.metrics.reset()
        fn(x)
        torch.tpu.synchronize()
        figures = torch_tpu.metrics.snapshot()
        per = figures["compile_time_s"] / max(figures["compiles"], 1)
        times.append(per)
        print(f"{name:<16} {per * 1e3:>12.1f}  ({figures['compiles']} programs)")
    print(f"{'median':<16} {statistics.median(times) * 1e3:>12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print(f"torch {torch.__version__}; tpu backed by {torch_tpu.platform()}; threads {torch.get_num_threads()}")
    warm(args.repeats)
    cold()


if __name__ == "__main__":
    main()
