"""``torch_tpu.kernels.stablehlo``: a PyTorch op from StableHLO text, with no JAX at run time."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch

from .. import _C
from . import _op

ResultType = tuple[Sequence[int], torch.dtype]


def stablehlo(
    text: str | Callable[..., str],
    *,
    name: str | None = None,
    result_types: ResultType | Sequence[ResultType] | None = None,
    shape_fn: Callable | None = None,
    num_outputs: int | None = None,
    entry: str = "main",
    backward: Callable | None = None,
):
    """Registers a PyTorch op that calls a StableHLO function, and returns it.

    ``text`` is a ``func.func`` with tensor arguments and results (bare, or in a ``module``, with
    any private helpers it calls), or a function that returns such text for the inputs it is
    given (tensors of each call's shapes and dtypes; called once per input signature). The op
    takes one tensor per argument of the function named ``entry`` (or of the only function).

    Its results are given by ``result_types`` (one ``(shape, dtype)`` or a list of them, for
    fixed shapes) or by ``shape_fn``, which maps the inputs to empty tensors of the results'
    shapes and dtypes (it is also the op's fake kernel, so ``torch.compile`` traces the op).
    ``num_outputs`` says how many results ``shape_fn`` returns when ``text`` is a function.

    ``backward(*inputs, *grad_outputs)`` returns one gradient (or None) per input; with it,
    autograd goes through the op. It may itself call kernels.

    The op runs on tpu tensors in every mode: its function is embedded in the surrounding
    program (a private function called with ``func.call``), so it fuses with its neighbours and
    is cached like any program. Text without a ``func.func`` raises ValueError now; text the
    plugin rejects raises at the first call, with the kernel's name and the plugin's message.
    """
    if (result_types is None) == (shape_fn is None):
        raise TypeError("stablehlo(): give either result_types or shape_fn")
    default_name = getattr(text, "__name__", "stablehlo" if entry == "main" else entry)
    qualname = _op.qualified_name(name, default_name)
    fixed = None if callable(text) else _C._kernel_function(qualname, text, entry)
    num_inputs = fixed.num_arguments if fixed is not None else len(inspect.signature(text).parameters)
    types = _result_types(result_types) if result_types is not None else None
    count = len(types) if types is not None else num_outputs or (fixed.num_results if fixed else 1)
    params = [_op.Param(f"x{i}", "Tensor") for i in range(num_inputs)]
    kernel = _StableHloKernel(qualname, text, fixed, entry, types, shape_fn, count)
    op = _op.define(qualname, _op.schema(params, count), kernel.tpu)
    op.register_fake(kernel.fake)
    if backward is not None:
        _register_backward(op, backward, num_inputs)
    return op


def _result_types(result_types) -> list[tuple[tuple[int, ...], torch.dtype]]:
    if len(result_types) == 2 and isinstance(result_types[1], torch.dtype):
        result_types = [result_types]
    types = []
    for shape, dtype in result_types:
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"stablehlo(): a result type is (shape, torch.dtype), got {(shape, dtype)!r}")
        types.append((tuple(int(d) for d in shape), dtype))
    return types


class _StableHloKernel:
    def __init__(self, qualname, text, fixed, entry, types, shape_fn, num_outputs):
        self.qualname = qualname
        self.text = text
        self.fixed = fixed
        self.entry = entry
        self.types = types
        self.shape_fn = shape_fn
        self.num_outputs = num_outputs
        self.embedded = _op.EmbeddedCache(self._build)

    def _result_types(self, inputs: Sequence[torch.Tensor]):
        if self.types is not None:
            return self.types
        metas = [torch.empty(t.shape, dtype=t.dtype, device="meta") for t in inputs]
        outputs = self.shape_fn(*metas)
        outputs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
        return [(tuple(o.shape), o.dtype) for o in outputs]

    def _build(self, key, inputs: Sequence[torch.Tensor]) -> _op.Embedded:
        types = self._result_types(inputs)
        if len(types) != self.num_outputs:
            raise RuntimeError(
                f"kernel '{self.qualname}': its shape function gave {len(types)} results, expected "
                f"{self.num_outputs} (pass num_outputs={len(types)})"
            )
        function = self.fixed
        if function is None:
            specs = [torch.empty(t.shape, dtype=t.dtype, device="meta") for t in inputs]
            function = _C._kernel_function(self.qualname, self.text(*specs), self.entry)
        sizes = tuple(size for size, _ in types)
        dtypes = tuple(dtype for _, dtype in types)
        return _op.Embedded(function, tuple(range(len(inputs))), sizes, dtypes)

    def tpu(self, *inputs: torch.Tensor):
        return _op.results(self.embedded.get(inputs, ()).call(inputs), self.num_outputs)

    def fake(self, *inputs: torch.Tensor):
        if self.shape_fn is not None:
            return self.shape_fn(*inputs)
        device = inputs[0].device if inputs else torch.device("tpu")
        outputs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in self.types]
        return _op.results(outputs, self.num_outputs)


def _register_backward(op, backward: Callable, num_inputs: int) -> None:
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        outputs = (output,) if isinstance(output, torch.Tensor) else output
        ctx.output_types = [(o.shape, o.dtype) for o in outputs]

    def backward_of_op(ctx, *grads):
        # Unused outputs get no gradient from autograd; the backward sees zeros for them.
        grads = [
            g if g is not None else torch.zeros(shape, dtype=dtype, device=ctx.saved_tensors[0].device)
            for g, (shape, dtype) in zip(grads, ctx.output_types, strict=True)
        ]
        result = backward(*ctx.saved_tensors, *grads)
        result = (result,) if isinstance(result, torch.Tensor) or result is None else tuple(result)
        if len(result) != num_inputs:
            raise RuntimeError(
                f"the backward of {op._qualname} returned {len(result)} gradients for {num_inputs} inputs"
            )
        return result

    op.register_autograd(backward_of_op, setup_context=setup_context)
