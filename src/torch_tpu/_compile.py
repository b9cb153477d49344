"""The ``tpu`` torch.compile backend: Dynamo's FX graphs replayed through the same ATen kernels
as eager mode (DESIGN.md: one lowering library for every mode). Each op still runs as its own
program; fusing a whole graph into one program is the fused-eager path's job, to come."""

from __future__ import annotations

import torch


def backend(graph_module: torch.fx.GraphModule, example_inputs):
    del example_inputs  # shapes are specialized per call by the eager kernels themselves
    return graph_module.forward
