"""``torch_tpu.kernels.jax``: a PyTorch op from a JAX function (Pallas kernels included).

For each input signature (shapes, dtypes, static values) the function is exported with
``jax.export`` for the device's platform and its StableHLO embedded like any other kernel's
(_op.py). The fake kernel comes from ``jax.eval_shape``; the backward is ``jax.vjp`` of the
function, exported the same way as a second op, so ``loss.backward()`` goes through it (it
recomputes the forward inside the backward's program, where XLA fuses the two).

JAX is imported on first use only: ``import torch_tpu`` never needs it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Sequence

import torch

from .. import _C
from . import _op

_TORCH_TO_JAX = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
    torch.bool: "bool",
}
_JAX_TO_TORCH = {name: dtype for dtype, name in _TORCH_TO_JAX.items()}


def _import_jax():
    try:
        import jax
    except ImportError as error:
        raise ImportError(
            "torch_tpu.kernels.jax needs JAX: pip install 'torch_tpu[jax]' (the pinned jax and jaxlib)"
        ) from error
    return jax


@functools.cache
def _platform() -> str:
    """The jax.export platform of the tpu device's plugin: "cpu", "tpu" or "cuda"."""
    return _C._platform()["platform"].lower()


@contextlib.contextmanager
def _pallas_interpreted(platform: str):
    """On the CPU plugin, Pallas kernels run interpreted (``interpret=True``): they lower to plain
    StableHLO (a loop over the grid) instead of a TPU or GPU custom call. JAX's switch for this is
    the config behind ``pltpu.force_tpu_interpret_mode``, set to True (not to InterpretParams,
    whose TPU simulation goes through host callbacks the plugin cannot run)."""
    if platform != "cpu":
        yield
        return
    from jax._src import config

    setting = getattr(config, "pallas_tpu_interpret_mode_context_manager", None)
    if setting is None:  # another JAX: pallas_call(..., interpret=True) must be written out
        yield
        return
    previous = setting.swap_local(True)
    try:
        yield
    finally:
        setting.set_local(previous)


def _avals(jax, tensors: Sequence[torch.Tensor]):
    specs = []
    for t in tensors:
        if t.dtype not in _TORCH_TO_JAX:
            raise TypeError(f"a JAX kernel cannot take {t.dtype} tensors")
        specs.append(jax.ShapeDtypeStruct(tuple(int(d) for d in t.shape), jax.numpy.dtype(_TORCH_TO_JAX[t.dtype])))
    return specs


def _torch_dtype(qualname: str, dtype) -> torch.dtype:
    found = _JAX_TO_TORCH.get(str(dtype))
    if found is None:
        raise TypeError(f"kernel '{qualname}' returns {dtype}, which has no torch dtype")
    return found


def _export(qualname: str, fn: Callable, tensors: Sequence[torch.Tensor]) -> _op.Embedded:
    """Exports ``fn`` (a function of arrays only) for these inputs and parses its StableHLO."""
    jax = _import_jax()
    platform = _platform()
    avals = _avals(jax, tensors)
    try:
        with _pallas_interpreted(platform):
            exported = jax.export.export(jax.jit(fn), platforms=[platform])(*avals)
    except Exception as error:
        error.add_note(f"torch_tpu: while exporting kernel '{qualname}' for {platform} inputs {avals}")
        raise
    for i, (requested, got) in enumerate(zip(avals, exported.in_avals, strict=True)):
        if requested.dtype != got.dtype:  # 64-bit types without jax_enable_x64
            raise TypeError(
                f"kernel '{qualname}': input {i} is {tensors[i].dtype}, which JAX turns into {got.dtype} "
                "(enable jax_enable_x64, or pass a 32-bit tensor)"
            )
    function = _C._kernel_function(qualname, exported.mlir_module(), "main")
    sizes = tuple(tuple(a.shape) for a in exported.out_avals)
    dtypes = tuple(_torch_dtype(qualname, a.dtype) for a in exported.out_avals)
    return _op.Embedded(function, tuple(exported.module_kept_var_idx), sizes, dtypes)


class JaxKernel:
    """A JAX function as a PyTorch op (``self.op``), with its backward."""

    def __init__(self, qualname: str, fn: Callable, num_outputs: int):
        self.qualname = qualname
        self.fn = fn
        self.params = _op.params_of(fn)
        self.num_outputs = num_outputs
        self.embedded = _op.EmbeddedCache(self._build)
        self._shapes: dict[tuple, list] = {}
        self._lock = threading.Lock()
        self.op = _op.define(qualname, _op.schema(self.params, num_outputs), self.tpu)
        self.op.register_fake(self.fake)
        self.vjp = _VjpKernel(self)
        self.op.register_autograd(self.vjp.backward, setup_context=self.vjp.setup_context)

    def bound(self, statics: tuple) -> Callable:
        """``fn`` with its static arguments bound: a function of its tensors (as arrays) only."""

        def call(*arrays):
            outputs = self.fn(*_op.merge(self.params, arrays, statics))
            return self._flat_outputs(outputs)

        return call

    def _flat_outputs(self, outputs):
        flat = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        if len(flat) != self.num_outputs:
            raise TypeError(
                f"kernel '{self.qualname}' returns {len(flat)} arrays but was declared with {self.num_outputs} "
                f"(annotate its return as tuple[jax.Array, ...] or pass num_outputs={len(flat)})"
            )
        return tuple(flat) if self.num_outputs > 1 else flat[0]

    def _build(self, key, tensors: Sequence[torch.Tensor]) -> _op.Embedded:
        return _export(self.qualname, self.bound(key[1]), tensors)

    def output_types(self, tensors: Sequence[torch.Tensor], statics: tuple) -> list:
        """(shape, dtype) per output, from ``jax.eval_shape`` (no export)."""
        key = _op.signature_key(tensors, statics)
        types = self._shapes.get(key)
        if types is None:
            jax = _import_jax()
            with _pallas_interpreted(_platform()):
                shapes = jax.eval_shape(self.bound(statics), *_avals(jax, tensors))
            leaves = shapes if self.num_outputs > 1 else (shapes,)
            types = [(tuple(s.shape), _torch_dtype(self.qualname, s.dtype)) for s in leaves]
            with self._lock:
                self._shapes[key] = types
        return types

    def tpu(self, *args):
        tensors, statics = _op.split(self.params, args)
        return _op.results(self.embedded.get(tensors, statics).call(tensors), self.num_outputs)

    def fake(self, *args):
        tensors, statics = _op.split(self.params, args)
        device = tensors[0].device if tensors else torch.device("tpu")
        outputs = [torch.empty(s, dtype=d, device=device) for s, d in self.output_types(tensors, statics)]
        return _op.results(outputs, self.num_outputs)


class _VjpKernel:
    """The backward of a JaxKernel: an op ``<name>_vjp(primals, cotangents, statics...)`` that
    returns the gradients of the floating-point primals, from ``jax.vjp``."""

    def __init__(self, forward: JaxKernel):
        self.forward = forward
        self.statics = [p for p in forward.params if not p.is_tensor]
        params = [_op.Param("primals", "Tensor[]"), _op.Param("cotangents", "Tensor[]"), *self.statics]
        op_schema = "(" + ", ".join(_op.argument(p) for p in params) + ") -> Tensor[]"
        self.qualname = forward.qualname + "_vjp"
        self.embedded = _op.EmbeddedCache(self._build)
        self.op = _op.define(self.qualname, op_schema, self.tpu)
        self.op.register_fake(self.fake)

    def pullback(self, statics: tuple, float_inputs: tuple, float_outputs: tuple, num_primals: int) -> Callable:
        """A function of (primals..., cotangents of the floating-point outputs...) returning the
        gradients of the floating-point primals."""
        jax = _import_jax()
        bound = self.forward.bound(statics)

        def call(*arrays):
            primals, cotangents = list(arrays[:num_primals]), iter(arrays[num_primals:])

            def of_floats(*floats):
                full = list(primals)
                for i, value in zip(float_inputs, floats, strict=True):
                    full[i] = value
                return bound(*full)

            outputs, pull = jax.vjp(of_floats, *[primals[i] for i in float_inputs])
            leaves = outputs if self.forward.num_outputs > 1 else (outputs,)
            # Integer outputs have no cotangent from torch: JAX wants float0 zeros for them.
            full = [
                next(cotangents) if is_float else jax.numpy.zeros(o.shape, jax.dtypes.float0)
                for o, is_float in zip(leaves, float_outputs, strict=True)
            ]
            return pull(tuple(full) if self.forward.num_outputs > 1 else full[0])

        return call

    def _build(self, key, tensors: Sequence[torch.Tensor]) -> _op.Embedded:
        shapes, statics_and_counts = key
        num_primals, statics = statics_and_counts[0], statics_and_counts[1:]
        primals = tensors[:num_primals]
        float_inputs = tuple(i for i, t in enumerate(primals) if t.dtype.is_floating_point)
        output_types = self.forward.output_types(primals, statics)
        float_outputs = tuple(dtype.is_floating_point for _, dtype in output_types)
        fn = self.pullback(statics, float_inputs, float_outputs, num_primals)
        try:
            return _export(self.qualname, fn, tensors)
        except Exception as error:
            error.add_note(
                f"torch_tpu: the backward of kernel '{self.forward.qualname}' is jax.vjp of it; "
                "a pallas_call is differentiated through a jax.custom_vjp around it"
            )
            raise

    def tpu(self, primals, cotangents, *statics):
        statics = (*statics, *(p.default for p in self.statics[len(statics) :]))  # as _op.split
        tensors = [*primals, *cotangents]
        return self.embedded.get(tensors, (len(primals), *statics)).call(tensors)

    def fake(self, primals, cotangents, *statics):
        return [torch.empty_like(p) for p in primals if p.dtype.is_floating_point]

    def setup_context(self, ctx, inputs, output):
        tensors, statics = _op.split(self.forward.params, inputs)
        ctx.save_for_backward(*tensors)
        ctx.statics = statics
        outputs = (output,) if self.forward.num_outputs == 1 else output
        ctx.output_types = [(o.shape, o.dtype) for o in outputs]

    def backward(self, ctx, *grads):
        primals = ctx.saved_tensors
        cotangents = [
            g if g is not None else torch.zeros(shape, dtype=dtype, device=primals[0].device)
            for g, (shape, dtype) in zip(grads, ctx.output_types, strict=True)
            if dtype.is_floating_point
        ]
        float_grads = iter(self.op(list(primals), cotangents, *ctx.statics))
        tensor_grads = iter([next(float_grads) if p.dtype.is_floating_point else None for p in primals])
        return tuple(next(tensor_grads) if p.is_tensor else None for p in self.forward.params)


def _num_outputs(fn: Callable, num_outputs: int | None) -> int:
    """From ``num_outputs``, else the return annotation (``tuple[jax.Array, ...]`` counts its
    elements), else 1."""
    if num_outputs is not None:
        return num_outputs
    annotation = getattr(fn, "__annotations__", {}).get("return")
    if isinstance(annotation, str):
        if annotation.startswith(("tuple[", "Tuple[")) and "..." not in annotation:
            return annotation.count(",") + 1
        return 1
    args = getattr(annotation, "__args__", None)
    if getattr(annotation, "__origin__", None) is tuple and args and Ellipsis not in args:
        return len(args)
    return 1


def jax(fn: Callable | None = None, *, name: str | None = None, num_outputs: int | None = None):
    """Decorator: a JAX function (Pallas kernels included) as a PyTorch op on tpu tensors.

    Parameters annotated ``int``, ``float``, ``bool`` or ``str`` are static (each value exports
    its own StableHLO); every other parameter is a tensor. The op returns one tensor, or
    ``num_outputs`` of them (default: the count of a ``tuple[...]`` return annotation, else 1).
    ``name`` is the op's qualified name (default ``tpu_kernels::<function name>``).

    The op is exported with ``jax.export`` once per input signature and embedded in the
    surrounding program, in strict, fused and compiled modes alike; its backward comes from
    ``jax.vjp``. Pallas kernels run interpreted on the CPU plugin and as Mosaic custom calls on TPU.
    """

    def decorate(function: Callable):
        kernel = JaxKernel(_op.qualified_name(name, function.__name__), function, _num_outputs(function, num_outputs))
        return kernel.op

    return decorate(fn) if fn is not None else decorate
