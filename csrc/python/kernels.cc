#include "python/kernels.h"

#include <torch/csrc/utils/pybind.h>

#include <stdexcept>

#include "aten/kernel_call.h"
#include "ir/function.h"

namespace torch_tpu::python {

namespace py = pybind11;

namespace {

std::shared_ptr<ir::Function> ParseKernel(const std::string& name, const std::string& text,
                                          const std::string& entry) {
  try {
    return ir::ParseFunction(name, text, entry);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
}

std::vector<at::Tensor> Call(const std::shared_ptr<ir::Function>& function,
                             const std::vector<at::Tensor>& inputs,
                             const std::vector<std::vector<int64_t>>& sizes,
                             const std::vector<at::ScalarType>& dtypes) {
  if (sizes.size() != dtypes.size()) throw py::value_error("one dtype per result size");
  std::vector<aten::KernelOutput> outputs;
  for (size_t i = 0; i < sizes.size(); ++i) outputs.push_back({sizes[i], dtypes[i]});
  py::gil_scoped_release release;  // a strict-mode call compiles and runs its program
  return aten::CallKernel(function, inputs, outputs);
}

}  // namespace

void BindKernels(py::module& m) {
  py::class_<ir::Function, std::shared_ptr<ir::Function>>(m, "_KernelFunction")
      .def_readonly("name", &ir::Function::name)
      .def_readonly("symbol", &ir::Function::symbol)
      .def_readonly("definitions", &ir::Function::definitions)
      .def_readonly("num_arguments", &ir::Function::num_arguments)
      .def_readonly("num_results", &ir::Function::num_results);
  m.def("_kernel_function", &ParseKernel, py::arg("name"), py::arg("text"), py::arg("entry"));
  m.def("_kernel_call", &Call, py::arg("function"), py::arg("inputs"), py::arg("sizes"),
        py::arg("dtypes"));
}

}  // namespace torch_tpu::python
