"""What every kind of custom kernel shares: its PyTorch op (a ``torch.library`` custom op), the
per-signature cache of embedded functions, and the call into C++ that records one node.

A kernel's tpu implementation never runs anything itself: it records one ``func.call`` of the
kernel's embedded StableHLO function on its inputs (``_C._kernel_call``), in every mode. Strict
mode then runs that call as its own program, fused eager mode keeps it pending with its
neighbours, and a ``torch.compile`` graph records it with the rest of the graph, so the kernel is
part of the one program of its step.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import _C

# Static (non-tensor) argument types a kernel may take, as schema types.
STATIC_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}
_STATIC_BY_NAME = {t.__name__: name for t, name in STATIC_TYPES.items()}

_names_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Param:
    """One argument of a kernel: a tensor, or a static value baked into its StableHLO."""

    name: str
    kind: str  # "Tensor", or a static schema type: "int", "float", "bool", "str"
    default: Any = inspect.Parameter.empty

    @property
    def is_tensor(self) -> bool:
        return self.kind == "Tensor"


def params_of(fn: Callable) -> list[Param]:
    """A Python function's parameters: those annotated int/float/bool/str are static, every other
    one (``jax.Array``, or none) is a tensor."""
    params = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"kernel {fn.__name__}: parameter '{p.name}' must be positional (no *args or **kwargs)")
        annotation = p.annotation
        if isinstance(annotation, str):  # from __future__ import annotations
            kind = _STATIC_BY_NAME.get(annotation, "Tensor")
        else:
            kind = STATIC_TYPES.get(annotation, "Tensor")
        if kind == "Tensor" and p.default is not p.empty:
            raise TypeError(f"kernel {fn.__name__}: tensor parameter '{p.name}' cannot have a default")
        params.append(Param(p.name, kind, p.default))
    return params


def argument(p: Param) -> str:
    """One argument of a schema: ``float eps=1e-06``."""
    if p.default is inspect.Parameter.empty:
        return f"{p.kind} {p.name}"
    return f"{p.kind} {p.name}={p.default!r}" if p.kind == "str" else f"{p.kind} {p.name}={p.default}"


def schema(params: Sequence[Param], num_outputs: int) -> str:
    """The op's schema: ``(Tensor x, float eps=1e-06) -> Tensor``."""
    returns = "Tensor" if num_outputs == 1 else "(" + ", ".join(["Tensor"] * num_outputs) + ")"
    return "(" + ", ".join(argument(p) for p in params) + ") -> " + returns


def qualified_name(name: str | None, default: str) -> str:
    """``ns::name`` as given, or ``tpu_kernels::<default>`` made unique in this process."""
    if name is not None:
        return name if "::" in name else f"tpu_kernels::{name}"
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in default) or "kernel"
    with _names_lock:
        for n in range(1, 10_000):
            candidate = f"tpu_kernels::{base}" if n == 1 else f"tpu_kernels::{base}_{n}"
            if not _op_exists(candidate):
                return candidate
    raise RuntimeError(f"no free name for kernel {default}")


def _op_exists(qualname: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(qualname, "")
        return True
    except RuntimeError:
        return False


@dataclasses.dataclass(frozen=True)
class Embedded:
    """A kernel's StableHLO for one input signature: the parsed function, which inputs it takes
    (jax.export drops unused ones) and its result types."""

    function: Any  # _C._KernelFunction
    kept: tuple[int, ...]
    sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]

    def call(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return _C._kernel_call(self.function, [tensors[i] for i in self.kept], self.sizes, self.dtypes)


def signature_key(tensors: Sequence[torch.Tensor], statics: tuple) -> tuple:
    """What a kernel's StableHLO depends on: its inputs' shapes and dtypes and its static values."""
    # int(): under torch.compile with dynamic shapes, a kernel is specialized to each size.
    return tuple((tuple(int(d) for d in t.shape), t.dtype) for t in tensors), statics


class EmbeddedCache:
    """Embedded functions per input signature, each built once (exported, parsed)."""

    def __init__(self, build: Callable[[tuple, Sequence[torch.Tensor]], Embedded]):
        self._build = build
        self._entries: dict[tuple, Embedded] = {}
        self._lock = threading.Lock()

    def get(self, tensors: Sequence[torch.Tensor], statics: tuple) -> Embedded:
        key = signature_key(tensors, statics)
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    entry = self._entries[key] = self._build(key, tensors)
        return entry

    def __len__(self) -> int:
        return len(self._entries)


def split(params: Sequence[Param], args: Sequence[Any]) -> tuple[list[torch.Tensor], tuple]:
    """The call's tensors and static values, in parameter order. The dispatcher may leave out
    trailing arguments equal to their defaults: they are filled back in."""
    args = (*args, *(p.default for p in params[len(args) :]))
    tensors, statics = [], []
    for p, a in zip(params, args, strict=True):
        (tensors if p.is_tensor else statics).append(a)
    return tensors, tuple(statics)


def merge(params: Sequence[Param], tensors: Sequence[Any], statics: Sequence[Any]) -> list[Any]:
    """The inverse of split: arguments in parameter order."""
    tensor_iter, static_iter = iter(tensors), iter(statics)
    return [next(tensor_iter) if p.is_tensor else next(static_iter) for p in params]


def results(outputs: list[torch.Tensor], num_outputs: int):
    return outputs[0] if num_outputs == 1 else tuple(outputs)


def define(qualname: str, op_schema: str, implementation: Callable):
    """The custom op, with ``implementation`` as its tpu kernel."""
    return torch.library.custom_op(qualname, implementation, mutates_args=(), device_types="tpu", schema=op_schema)
