// torch.profiler on tpu: a kineto child profiler that turns the activities exec/profile.h records
// into device events (profiler.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu::python {

// Registers the tpu activity profiler with kineto (at import).
void BindProfiler(pybind11::module& m);

}  // namespace torch_tpu::python
