// Collectives inside the program, run over one tpu tensor per device
// (torch_tpu.distributed._in_program).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu::python {

void BindInProgramCollectives(pybind11::module& m);

}  // namespace torch_tpu::python
