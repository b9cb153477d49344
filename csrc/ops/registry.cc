#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "ops/builder.h"

namespace torch_tpu::ops {

namespace {
std::unordered_map<std::string, Lowering>& Table() {
  static std::unordered_map<std::string, Lowering> table;
  return table;
}
}  // namespace

void RegisterLowering(const std::string& name, Lowering lowering) {
  if (!Table().emplace(name, lowering).second) {
    throw std::logic_error("lowering registered twice: " + name);
  }
}

Lowering FindLowering(const std::string& name) {
  auto it = Table().find(name);
  return it == Table().end() ? nullptr : it->second;
}

std::vector<std::string> RegisteredLowerings() {
  std::vector<std::string> names;
  for (const auto& [name, lowering] : Table()) names.push_back(name);
  return names;
}

const Argument& LoweringContext::arg(size_t i) const {
  if (i >= args.size()) throw std::logic_error(name + ": missing argument " + std::to_string(i));
  return args[i];
}

Value LoweringContext::tensor(size_t i) const {
  const Argument& a = arg(i);
  if (a.kind != Argument::Kind::kTensor) {
    throw std::logic_error(name + ": argument " + std::to_string(i) + " is not a tensor");
  }
  return a.tensor;
}

GrowingValue LoweringContext::growing(size_t i, size_t entry) const {
  if (!has(i)) return {};
  const Argument& a = args[i];
  return entry < a.growing.size() ? a.growing[entry] : GrowingValue{};
}

Value LoweringContext::value(size_t i, DType dtype) const {
  const Argument& a = arg(i);
  if (a.kind == Argument::Kind::kTensor && !a.host_scalar) return Convert(a.tensor, dtype);
  return ScalarParameter(a.scalar, dtype);
}

Scalar LoweringContext::scalar(size_t i) const {
  const Argument& a = arg(i);
  if (a.kind == Argument::Kind::kNone || a.kind == Argument::Kind::kTensor) {
    throw std::logic_error(name + ": argument " + std::to_string(i) + " is not a scalar");
  }
  return a.scalar;
}

int64_t LoweringContext::int_arg(size_t i) const { return scalar(i).ToInt(); }

const std::vector<int64_t>& LoweringContext::int_list(size_t i) const { return arg(i).ints; }

const std::vector<double>& LoweringContext::double_list(size_t i) const { return arg(i).doubles; }

const std::string& LoweringContext::string_arg(size_t i) const { return arg(i).text; }

}  // namespace torch_tpu::ops
