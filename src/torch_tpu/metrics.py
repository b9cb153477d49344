"""Counters and timers of the tpu device: compiles, cache hits, executions, transfers,
CPU fallbacks and sync points."""

from __future__ import annotations

from torch_tpu import _C


def snapshot() -> dict:
    """The current figures as a dict (``compiles``, ``memory_cache_hits``, ``disk_cache_hits``,
    ``executions``, ``transfers_to_device``, ``transfers_to_host``, ``cpu_fallbacks``, ...)."""
    return dict(_C._metrics())


def reset() -> None:
    _C._reset_metrics()


def report(file=None) -> str:
    """Prints the figures as a table (and returns the text)."""
    figures = snapshot()
    rows = [
        ("compiles", figures["compiles"]),
        ("compile time (s)", f"{figures['compile_time_s']:.3f}"),
        ("memory cache hits", figures["memory_cache_hits"]),
        ("disk cache hits", figures["disk_cache_hits"]),
        ("cache misses", figures["cache_misses"]),
        ("executions", figures["executions"]),
        ("transfers to device", f"{figures['transfers_to_device']} ({figures['bytes_to_device']} bytes)"),
        ("transfers to host", f"{figures['transfers_to_host']} ({figures['bytes_to_host']} bytes)"),
        ("scalar parameter uploads", figures["scalar_uploads"]),
        ("meta functions run", figures["meta_runs"]),
        ("donated buffers", figures["donated_buffers"]),
        ("volatile fused programs", figures["volatile_programs"]),
        ("compiled graph calls", figures["compiled_graph_calls"]),
        ("  launched directly (no recording)", figures["compiled_graph_direct_calls"]),
        ("  programs they ran", figures["compiled_graph_executions"]),
        ("cpu fallbacks", figures["cpu_fallbacks"]),
    ]
    rows += [(f"  fallback {op}", count) for op, count in sorted(figures["cpu_fallbacks_per_op"].items())]
    rows += [(f"sync: {reason}", count) for reason, count in sorted(figures["sync_reasons"].items())]
    width = max(len(name) for name, _ in rows)
    lines = ["torch_tpu metrics", "-" * (width + 24)]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    text = "\n".join(lines)
    print(text, file=file)
    return text
