"""The ``tpu`` torch.compile backend (DESIGN.md, "torch.compile").

Dynamo's graph goes through aot_autograd, which splits it into a forward and a backward graph of
ATen ops; input mutations come back as copies into the inputs at the end. Each graph then runs
through the same ATen kernels as eager mode, inside one deferred scope: its ops are recorded,
not run, and the end of the scope cuts them into one program. That program is keyed
structurally like every fused-eager program, so the next call, or the next process through the
disk cache, compiles nothing. The copies into mutated inputs are part of the same program, so
the inputs' old buffers are donated to the new values (a compiled optimizer step allocates
nothing new).
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import warnings
import weakref

import torch

from .. import _C

_DYNAMIC_SHAPES_NOTE = (
    "torch_tpu: a torch.compile graph with dynamic shapes runs on tpu specialized to each size it "
    "meets: every new size compiles one new program (then cached, in memory and on disk). "
    "torch_tpu.metrics counts them; fixed or padded sizes avoid it."
)


@functools.cache
def _decompositions() -> dict:
    """PyTorch's core decompositions, for the ops that have no tpu lowering and no tpu kernel
    only: an op that lowers stays one op, as in eager mode."""
    from torch._decomp import core_aten_decompositions

    lowered = set(_C._registered_lowerings())
    table = {}
    for op, decomposition in core_aten_decompositions().items():
        name = op.name()
        base = name.split("::", 1)[-1].split(".", 1)[0]
        if base in lowered or torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
            continue
        table[op] = decomposition
    return table


def _has_dynamic_shapes(example_inputs) -> bool:
    for value in example_inputs:
        if isinstance(value, torch.SymInt):
            return True
        if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape):
            return True
    return False


# The compiled graphs, for _graph_source_line; weak, so a dropped graph is not kept alive.
_GRAPH_MODULES: weakref.WeakSet = weakref.WeakSet()


def _graph_module_of(path: str) -> torch.fx.GraphModule | None:
    """The graph whose generated code has the file name `path` ("<eval_with_key>.N"). Looked up
    by its current code: a lazily compiled graph gets its code at its first call."""
    for graph_module in list(_GRAPH_MODULES):
        if graph_module.forward.__code__.co_filename.split(" ", 1)[0] == path:
            return graph_module
    return None


def _graph_source_line(path: str, line: int) -> str | None:
    """The user's source line behind a line of a compiled graph's generated code, from the stack
    trace Dynamo keeps on each FX node, or None when there is none. The C++ side asks once per
    recording site, so an op recorded (or a device-side check) by a graph names the user's line."""
    graph_module = _graph_module_of(path)
    if graph_module is None:
        return None
    code = graph_module.forward.__code__
    index = getattr(graph_module, "_lineno_map", None) or {}
    index = index.get(line - code.co_firstlineno)
    nodes = list(graph_module.graph.nodes)
    if index is None or index >= len(nodes):
        return None
    frames = re.findall(r'File "([^"]+)", line (\d+)', nodes[index].meta.get("stack_trace") or "")
    if not frames:
        return None
    file, user_line = frames[-1]
    source = linecache.getline(file, int(user_line)).strip()
    return f"{file}:{user_line} ({source})" if source else f"{file}:{user_line}"


def _dump_graph(graph_module: torch.fx.GraphModule, kind: str) -> None:
    directory = os.environ.get("TORCH_TPU_DUMP_DIR") or os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "torch_tpu_dumps"
    )
    os.makedirs(directory, exist_ok=True)
    _dump_graph.count = getattr(_dump_graph, "count", 0) + 1
    path = os.path.join(directory, f"graph-{os.getpid()}-{_dump_graph.count}-{kind}.py")
    with open(path, "w") as f:
        f.write(graph_module.print_readable(print_output=False))


class _GraphProgram:
    """A boxed callable running one aot_autograd graph as one program.

    The first call records the graph's ops in a deferred scope and captures the cut; while the
    inputs keep that layout, later calls launch the captured program directly (a plan, csrc/python/
    compiled_graph.cc), random ops drawing new keys from their generators. A call the plan refuses
    is recorded again, which compiles nothing new: the program's structural key is the same.
    Graphs whose layout keeps changing stop being captured.
    """

    _MAX_CAPTURES = 4

    def __init__(self, graph_module: torch.fx.GraphModule):
        self.graph_module = graph_module
        self.plan = None
        self.captures_left = self._MAX_CAPTURES

    def __call__(self, args):
        if self.plan is not None:
            outputs = self.plan.run(args)
            if outputs is not None:
                args.clear()
                return outputs
        inputs = list(args) if self.captures_left else None
        _C._enter_compiled_graph()
        capture = _C._CompiledGraphCapture(inputs) if inputs is not None else None
        try:
            try:
                outputs = self.graph_module(*args)
                args.clear()  # boxed: the graph's inputs are freed as soon as it is done with them
            except BaseException:
                _C._exit_deferred("compiled graph error")  # what was recorded still runs, as eager
                raise
            _C._exit_compiled_graph()
            if capture is not None:
                self.captures_left -= 1
                self.plan = capture.finish(outputs)
                capture = None
            return outputs
        finally:
            if capture is not None:
                capture.abandon()


def _program_for_graph(kind: str):
    """An aot_autograd compiler: the graph becomes a boxed callable that runs it as one program."""

    def compiler(graph_module: torch.fx.GraphModule, example_inputs):
        if os.environ.get("TORCH_TPU_DUMP_PROGRAMS") == "1":
            _dump_graph(graph_module, kind)
        _GRAPH_MODULES.add(graph_module)
        run = _GraphProgram(graph_module)
        run._boxed_call = True
        return run

    return compiler


def backend(graph_module: torch.fx.GraphModule, example_inputs):
    """torch.compile(..., backend="tpu"): one program per graph (forward, backward)."""
    from torch._dynamo.backends.common import aot_autograd

    if _has_dynamic_shapes(example_inputs):
        warnings.warn(_DYNAMIC_SHAPES_NOTE, stacklevel=2)
    compile_graph = aot_autograd(
        fw_compiler=_program_for_graph("forward"),
        bw_compiler=_program_for_graph("backward"),
        inference_compiler=_program_for_graph("inference"),
        decompositions=_decompositions(),
        keep_inference_input_mutations=True,
    )
    return compile_graph(graph_module, example_inputs)
