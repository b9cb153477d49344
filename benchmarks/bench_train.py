"""Training-step cost of a small GPT-style transformer on tpu (strict mode) against native CPU
torch, side by side in one run, plus how many programs one step compiles and the cold/warm time
of the first step.

    .venv/bin/python benchmarks/bench_train.py [--steps 20]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="bench_train_"))  # cold start

import torch  # noqa: E402

import torch_tpu  # noqa: E402
from torch_tpu import _C  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from tiny_lm import LanguageModel  # noqa: E402

VOCAB, CONTEXT, BATCH = 256, 64, 8


def make_step(model, optimizer):
    def step(tokens):
        optimizer.zero_grad()
        loss = model.loss(tokens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return step


def timed_steps(device, model, batches, sync):
    model = copy.deepcopy(model).to(device)
    step = make_step(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    times, compiles = [], []
    for tokens in batches:
        start = time.perf_counter()
        loss = step(tokens.to(device))
        loss.item()  # the step's result reaches the host
        sync()
        times.append(time.perf_counter() - start)
        compiles.append(torch_tpu.metrics.snapshot()["compiles"])
    return times, compiles


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--precision", default=None, help="DEFAULT, HIGH or HIGHEST (default: torch_tpu's default)")
    args = parser.parse_args()
    if args.precision is not None:
        torch.tpu.precision(args.precision)
    torch.manual_seed(0)
    model = LanguageModel(VOCAB, context=CONTEXT)
    batches = [torch.randint(0, VOCAB, (BATCH, CONTEXT + 1)) for _ in range(args.steps)]
    print(f"torch {torch.__version__}; tpu backed by {torch_tpu.platform()}; precision {torch.tpu.precision().name}")
    print(f"model: examples/tiny_lm.py (2 layers, width 128), context {CONTEXT}, batch {BATCH}, AdamW + clipping")

    cpu, _ = timed_steps("cpu", model, batches, lambda: None)
    torch_tpu.metrics.reset()
    tpu_cold, compiles = timed_steps("tpu", model, batches, torch.tpu.synchronize)
    first_step = torch_tpu.metrics.snapshot()
    _C._clear_memory_cache()  # a new process: programs come from the disk cache
    torch_tpu.metrics.reset()
    tpu_warm, _ = timed_steps("tpu", model, batches[:3], torch.tpu.synchronize)
    warm_figures = torch_tpu.metrics.snapshot()

    cpu_median = statistics.median(cpu[2:])
    tpu_median = statistics.median(tpu_cold[2:])
    print(
        f"step time (median of steps 3..{args.steps}): cpu {cpu_median * 1e3:.1f} ms, "
        f"tpu {tpu_median * 1e3:.1f} ms, tpu/cpu {tpu_median / cpu_median:.2f}"
    )
    print(
        f"first step on tpu: cold {tpu_cold[0]:.2f} s (empty cache), "
        f"warm {tpu_warm[0]:.2f} s (disk cache: {warm_figures['disk_cache_hits']} hits, "
        f"{warm_figures['compiles']} compiles)"
    )
    new = [compiles[0]] + [b - a for a, b in zip(compiles, compiles[1:], strict=False)]
    print(
        f"programs compiled per step: {new[:4]} ... (last step {new[-1]}); total {compiles[-1]}; "
        f"executions per step: {first_step['executions'] / args.steps:.0f}"
    )


if __name__ == "__main__":
    main()
