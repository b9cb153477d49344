"""CPU references for bfloat16/float16 computed in float32 and rounded once per op.

The CPU's own half-precision kernels differ from one processor to the next: oneDNN's bf16
convolutions and matmuls accumulate differently with and without AVX-512, and ATen's vectorised
kernels reduce in other orders on AVX2 and AVX-512. A test that compares with them passes on one CI
machine and fails on another. Under `Float32Reference`, every CPU op that reads a bf16/f16 tensor
runs in float32 on the same (already rounded) values and its results are rounded to the dtypes the
CPU kernel gives, which is machine-independent up to float32 rounding, far inside a bf16/f16
tolerance. The native kernel still runs first, so argument errors, result dtypes and shapes stay
exactly the CPU's.

Only kernels that accumulate are affected: the machine-dependent ones. Pointwise ops compute each
element in float32 and round it on every processor alike, and tests rely on their exact
half-precision semantics (where a scalar is rounded to the dtype first, nextafter, nan_to_num's
largest finite value), so they run natively, as do ops that move or reinterpret data (views,
copies, casts), and seeded random ops (running one twice would shift the
generator).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

LOW_PRECISION = (torch.bfloat16, torch.float16)

# Ops whose low-precision results are exact whatever the machine: data movement and creation.
NATIVE_OPS = {
    "_to_copy",
    "copy_",
    "_copy_from",
    "_copy_from_and_resize",
    "clone",
    "contiguous",
    "_local_scalar_dense",
    "set_",
    "resize_",
    "resize_as_",
    "lift_fresh",
    "lift_fresh_copy",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "equal",
    "floor_divide",  # pointwise, though not tagged so
    "histc",  # its bin edges are computed in the input's dtype
    "fractional_max_pool2d",  # its windows' starts are computed in the input's dtype
    "fractional_max_pool3d",
}
# Composites whose CPU path reaches machine-specific kernels without the dispatcher (through
# DispatchStubs), so the mode cannot intercept their parts: oneDNN's bf16 convolutions.
ACCUMULATING_COMPOSITES = {"convolution", "convolution_backward"}
_INTERCEPTED: dict = {}


def _accumulates(func) -> bool:
    """A kernel of the CPU's own (or one of ACCUMULATING_COMPOSITES) that is not pointwise (nor a
    view, a copy or a random op). Other composites are intercepted part by part, with each part's
    rounding, as tpu computes them."""
    decision = _INTERCEPTED.get(func)
    if decision is None:
        decision = (
            not func.is_view
            and func._overloadpacket.__name__ not in NATIVE_OPS
            and torch.Tag.pointwise not in func.tags
            and torch.Tag.nondeterministic_seeded not in func.tags
            and (
                torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CPU")
                or func._overloadpacket.__name__ in ACCUMULATING_COMPOSITES
            )
        )
        _INTERCEPTED[func] = decision
    return decision


def _reads_low_precision_cpu(args, kwargs) -> bool:
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    return all(t.device.type == "cpu" for t in tensors) and any(t.dtype in LOW_PRECISION for t in tensors)


def _widen(value):
    """Half-precision tensors, and dtype arguments naming a half type, become float32."""
    if isinstance(value, torch.Tensor) and value.dtype in LOW_PRECISION:
        return value.to(torch.float32)
    if isinstance(value, torch.dtype) and value in LOW_PRECISION:
        return torch.float32
    return value


def _written_arguments(func) -> list[str | int]:
    """The positions (and keyword names) of the arguments the op writes (in-place and out=)."""
    written = []
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            written.append(argument.name if argument.kwarg_only else i)
    return written


def _argument(args, kwargs, key):
    return kwargs.get(key) if isinstance(key, str) else (args[key] if key < len(args) else None)


class Float32Reference(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _accumulates(func) or not _reads_low_precision_cpu(args, kwargs):
            return func(*args, **kwargs)
        written = _written_arguments(func)
        if not written:
            native = func(*args, **kwargs)  # the CPU's errors, dtypes and shapes
            wide = func(*tree_map(_widen, args), **tree_map(_widen, kwargs))
            return _round_like(native, wide)
        # In-place and out= ops: the native kernel runs on copies of the written tensors (for its
        # errors), then the float32 result is rounded into the originals.
        targets = {key: _argument(args, kwargs, key) for key in written}
        copies = {key: t.clone() for key, t in targets.items() if isinstance(t, torch.Tensor)}
        func(*_replace(args, copies), **_replace(kwargs, copies))
        widened = {
            key: t.to(torch.float32)
            for key, t in targets.items()
            if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION
        }
        wide_args = tree_map(_widen, _replace(args, widened))
        wide_kwargs = tree_map(_widen, _replace(kwargs, widened))
        result = func(*wide_args, **wide_kwargs)
        for key, wide_target in widened.items():
            target = targets[key]
            if target.shape != wide_target.shape:
                target.resize_(wide_target.shape)
            target.copy_(wide_target)
        return _results_to_targets(func, result, args, kwargs)


def _replace(container, replacements):
    """args (a tuple) or kwargs (a dict) with the entries named in `replacements` swapped."""
    if isinstance(container, dict):
        return {k: replacements.get(k, v) for k, v in container.items()}
    return tuple(replacements.get(i, v) for i, v in enumerate(container))


def _round_like(native, wide):
    """`wide`'s values in `native`'s dtypes; exact (non-floating) results are the native ones."""
    if isinstance(native, torch.Tensor):
        if native.dtype.is_floating_point and isinstance(wide, torch.Tensor):
            return wide.to(native.dtype)
        return native
    if isinstance(native, (tuple, list)):
        return type(native)(_round_like(n, w) for n, w in zip(native, wide, strict=True))
    return native


def _results_to_targets(func, result, args, kwargs):
    """Each result the schema says aliases a written argument is that (original) argument."""
    aliased = []
    for ret in func._schema.returns:
        key = None
        if ret.alias_info is not None and ret.alias_info.is_write:
            for i, argument in enumerate(func._schema.arguments):
                if argument.alias_info is not None and argument.alias_info.before_set == ret.alias_info.before_set:
                    key = argument.name if argument.kwarg_only else i
        aliased.append(key)
    values = list(result) if isinstance(result, (tuple, list)) else [result]
    values = [v if key is None else _argument(args, kwargs, key) for v, key in zip(values, aliased, strict=True)]
    return type(result)(values) if isinstance(result, (tuple, list)) else values[0]
