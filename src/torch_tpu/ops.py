"""``torch.tpu.ops``: tpu-specific operators.

``optimization_barrier(*tensors)`` returns its tensors' values unchanged, but XLA may not move
computation across it: nothing is fused, reordered or rematerialized through the barrier
(StableHLO ``optimization_barrier``). It is the op ``tpu::optimization_barrier``, one overload per
number of tensors (``.n1``, ``.n2``, …, defined on first use), with no tpu kernel of its own: the
boxed fallback lowers every overload through the one lowering in ``csrc/ops/barrier.cc``. On the
CPU (and under the meta device) it returns copies of its inputs.
"""

from __future__ import annotations

import threading

import torch

__all__ = ["optimization_barrier"]

_library = torch.library.Library("tpu", "FRAGMENT")
_defined: set[int] = set()
_lock = threading.Lock()


def _copies(*tensors: torch.Tensor):
    copies = tuple(t.clone() for t in tensors)
    return copies[0] if len(copies) == 1 else copies


def _setup_context(ctx, inputs, output) -> None:
    del ctx, inputs, output


def _backward(ctx, *grads):
    # The barrier is the identity on values, so gradients pass straight through.
    del ctx
    return grads[0] if len(grads) == 1 else tuple(grads)


def _overload(count: int):
    """The overload of tpu::optimization_barrier that takes ``count`` tensors."""
    with _lock:
        if count not in _defined:
            name = f"n{count}"
            arguments = ", ".join(f"Tensor t{i}" for i in range(count))
            returns = "Tensor" if count == 1 else "(" + ", ".join(["Tensor"] * count) + ")"
            _library.define(f"optimization_barrier.{name}({arguments}) -> {returns}")
            qualified = f"tpu::optimization_barrier.{name}"
            _library.impl(f"optimization_barrier.{name}", _copies, "CPU")
            _library.impl(f"optimization_barrier.{name}", _copies, "Meta")
            torch.library.register_autograd(qualified, _backward, setup_context=_setup_context, lib=_library)
            _defined.add(count)
    return getattr(torch.ops.tpu.optimization_barrier, f"n{count}")


def optimization_barrier(*tensors: torch.Tensor):
    """Returns ``tensors``' values unchanged, as one barrier XLA does not optimize across.

    Takes tensors, or one list or tuple of them, on one device, and returns new tensors in the
    same structure (as ``jax.lax.optimization_barrier`` does): one tensor for one tensor, a tuple
    for several tensors or for a list/tuple.
    """
    as_sequence = len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
    if as_sequence:
        tensors = tuple(tensors[0])
    if not tensors:
        return ()
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"optimization_barrier expects tensors, got {type(t).__name__}")
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"optimization_barrier expects tensors on one device, got {sorted(map(str, devices))}")
    result = _overload(len(tensors))(*tensors)
    if len(tensors) == 1:
        return (result,) if as_sequence else result
    return tuple(result)
