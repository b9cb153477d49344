#include "python/distributed.h"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/process_group_tpu.h"

namespace torch_tpu::python {

namespace py = pybind11;

void BindDistributed(py::module& m) {
  // Derives from torch's own binding of c10d::Backend, so ProcessGroup accepts it as a backend.
  py::class_<distributed::ProcessGroupTPU, c10d::Backend,
             c10::intrusive_ptr<distributed::ProcessGroupTPU>>(m, "_ProcessGroupTPU")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       const c10::intrusive_ptr<c10d::Backend>& host,
                       std::chrono::milliseconds timeout, bool check_across_ranks) {
             return c10::make_intrusive<distributed::ProcessGroupTPU>(store, rank, size, host,
                                                                      timeout, check_across_ranks);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("host"), py::arg("timeout"),
           py::arg("check_across_ranks") = true, py::call_guard<py::gil_scoped_release>());
}

}  // namespace torch_tpu::python
