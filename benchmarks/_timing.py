"""Timing shared by the benchmarks: medians of wall time, each sample waiting for its result."""

from __future__ import annotations

import statistics
import time


def sample_seconds(fn, sync, repeats: int, warmup: int = 5) -> list[float]:
    """Wall time of `fn()` plus `sync()`, `repeats` times after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        sync()  # while `result` is alive, so the wait covers its computation
        samples.append(time.perf_counter() - start)
        del result
    return samples


def median_seconds(fn, sync, repeats: int) -> float:
    return statistics.median(sample_seconds(fn, sync, repeats))
