#include "python/in_program.h"

#include <torch/csrc/utils/pybind.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "distributed/in_program.h"

namespace torch_tpu::python {

namespace py = pybind11;
namespace collectives = distributed::in_program;

namespace {

template <typename Value>
Value Lookup(const std::map<std::string, Value>& table, const std::string& name, const char* what) {
  auto found = table.find(name);
  if (found != table.end()) return found->second;
  std::string known;
  for (const auto& [key, value] : table) known += (known.empty() ? "" : ", ") + key;
  throw py::value_error(std::string("unknown ") + what + " '" + name + "'; expected one of " +
                        known);
}

collectives::Kind ParseKind(const std::string& name) {
  static const std::map<std::string, collectives::Kind> kinds = {
      {"all_reduce", collectives::Kind::kAllReduce},
      {"all_gather", collectives::Kind::kAllGather},
      {"reduce_scatter", collectives::Kind::kReduceScatter},
      {"all_to_all", collectives::Kind::kAllToAll},
      {"collective_permute", collectives::Kind::kCollectivePermute},
  };
  return Lookup(kinds, name, "collective");
}

collectives::Reduction ParseReduction(const std::string& name) {
  static const std::map<std::string, collectives::Reduction> reductions = {
      {"sum", collectives::Reduction::kSum}, {"product", collectives::Reduction::kProduct},
      {"min", collectives::Reduction::kMin}, {"max", collectives::Reduction::kMax},
      {"avg", collectives::Reduction::kAvg}, {"premul_sum", collectives::Reduction::kPremulSum},
  };
  return Lookup(reductions, name, "reduce op");
}

std::vector<at::Tensor> RunCollective(const std::string& kind,
                                      const std::vector<at::Tensor>& inputs,
                                      const std::string& reduction,
                                      std::vector<std::vector<int64_t>> groups,
                                      std::vector<std::pair<int64_t, int64_t>> pairs,
                                      double factor) {
  collectives::Collective collective;
  collective.kind = ParseKind(kind);
  collective.reduction = ParseReduction(reduction);
  collective.num_replicas = static_cast<int>(inputs.size());
  collective.groups = std::move(groups);
  collective.source_target_pairs = std::move(pairs);
  collective.factor = factor;
  py::gil_scoped_release release;
  try {
    return collectives::Run(collective, inputs);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());  // translated to Python once the GIL is held again
  }
}

}  // namespace

void BindInProgramCollectives(py::module& m) {
  m.def("_in_program_collective", &RunCollective, py::arg("kind"), py::arg("inputs"), py::arg("op"),
        py::arg("groups"), py::arg("pairs"), py::arg("factor"));
}

}  // namespace torch_tpu::python
