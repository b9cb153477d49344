#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu::python {

// torch_tpu._C._ProcessGroupTPU, a torch.distributed Backend (see distributed/).
void BindDistributed(pybind11::module& m);

}  // namespace torch_tpu::python
