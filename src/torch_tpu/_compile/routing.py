"""torch.compile with no backend, or backend="inductor", on tpu code runs the ``tpu`` backend.

Inductor's own code generation for a device named tpu is Pallas through JAX, which is not this
backend's. The routing wraps the entry torch.compile uses for Inductor; a graph that touches no
tpu tensor still goes to Inductor, so CPU and CUDA code keep it.
"""

from __future__ import annotations

import warnings

import torch

_ROUTED = (
    "torch_tpu: torch.compile's Inductor backend does not generate code for tpu; this graph runs "
    'with torch_tpu\'s "tpu" backend instead (pass backend="tpu" to choose it explicitly).'
)

_warned = False  # one warning per process


def _on_tpu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "tpu"


def touches_tpu(graph_module: torch.fx.GraphModule, example_inputs) -> bool:
    """Whether the graph reads or makes a tpu tensor: its inputs, or any value it computes (a graph
    may create its tensors itself)."""
    if any(_on_tpu(value) for value in example_inputs):
        return True
    for node in graph_module.graph.nodes:
        value = node.meta.get("val", node.meta.get("example_value"))
        values = value if isinstance(value, (list, tuple)) else (value,)
        if any(_on_tpu(v) for v in values):
            return True
    return False


def install() -> None:
    """Wraps torch.compile's Inductor entry once (torch.compile(model) and backend="inductor")."""
    wrapper = torch._TorchCompileInductorWrapper
    inductor_call = wrapper.__call__
    if getattr(inductor_call, "_torch_tpu_routed", False):
        return

    def call(self, model_, inputs_):
        if touches_tpu(model_, inputs_):
            from .dynamo_backend import backend

            global _warned
            if not _warned:
                _warned = True
                warnings.warn(_ROUTED, stacklevel=2)
            return backend(model_, inputs_)
        return inductor_call(self, model_, inputs_)

    call._torch_tpu_routed = True
    wrapper.__call__ = call
