// torch.compile graphs run directly from a captured plan (compiled_graph.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu::python {

void BindCompiledGraphs(pybind11::module& m);

}  // namespace torch_tpu::python
