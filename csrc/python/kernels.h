// Custom kernels (src/torch_tpu/kernels/): embedded StableHLO functions and their calls.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu::python {

void BindKernels(pybind11::module& m);

}  // namespace torch_tpu::python
