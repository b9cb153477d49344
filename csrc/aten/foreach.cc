// Batched ops (_foreach_*) become one program. PyTorch's kernels for them on every backend but
// CUDA loop over the tensors, calling the single-tensor op for each; we run a loop inside a
// DeferredScope, so the per-tensor ops are recorded and then cut as one program, in strict mode
// too.
//
// The elementwise ops optimizers use (add, mul, lerp, addcdiv, sqrt, ...) on float tensors of one
// shape and dtype per entry record each entry's single op straight through its lowering: the
// result of such an op is laid out as its self, so neither PyTorch's meta function nor a trip
// through the dispatcher (and the CPU kernel's wrapping of a Scalar into a tensor) is needed, and
// an AdamW step records several times faster. Any other batched op, or arguments outside that
// case, take PyTorch's generic loop, reached through the CPU slot of the dispatch table, which
// holds that (CompositeExplicitAutograd) kernel for every _foreach_ op and touches no CPU memory.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aten/fallback.h"
#include "aten/tpu_tensor.h"
#include "exec/pending.h"

namespace torch_tpu::aten {

namespace {

// How a batched op's argument becomes its single op's argument for entry i.
enum class PerEntry { kListEntry, kScalarListEntry, kShared };

// The single-tensor op a batched op applies to each entry.
struct EntryPlan {
  c10::OperatorHandle op;
  std::vector<PerEntry> arguments;    // one per batched-op argument
  std::vector<c10::IValue> trailing;  // the single op's defaulted arguments the batched op lacks
  bool in_place = false;
};

// Single ops whose result, for float operands of one dtype and real scalars, has self's shape
// and dtype: what lets an entry skip the meta function.
bool ShapePreservingElementwise(const std::string& base) {
  static const std::unordered_set<std::string> names = {
      "add",  "sub",     "mul",  "div", "lerp", "addcmul",   "addcdiv",
      "sqrt", "rsqrt",   "exp",  "log", "neg",  "abs",       "reciprocal",
      "sign", "sigmoid", "tanh", "sin", "cos",  "clamp_min", "clamp_max"};
  return names.count(base) > 0;
}

std::optional<EntryPlan> PlanEntries(const c10::FunctionSchema& batched) {
  const std::string name = batched.name().substr(std::string("aten::_foreach_").size());
  const bool in_place = !name.empty() && name.back() == '_';
  const std::string base = in_place ? name.substr(0, name.size() - 1) : name;
  if (!ShapePreservingElementwise(base)) return std::nullopt;
  // _foreach_mul_.List is mul_.Tensor, .ScalarList is .Scalar; clamp_min_.Scalar is clamp_min_.
  const std::string& overload = batched.overload_name();
  const std::string mapped = overload == "List"         ? "Tensor"
                             : overload == "ScalarList" ? "Scalar"
                                                        : overload;
  std::optional<c10::OperatorHandle> single;
  for (const std::string& candidate : {mapped, std::string()}) {
    single = c10::Dispatcher::singleton().findSchema({"aten::" + name, candidate});
    if (single) break;
  }
  if (!single) return std::nullopt;
  const auto& from = batched.arguments();
  const auto& to = single->schema().arguments();
  if (to.size() < from.size() || single->schema().returns().size() != 1) return std::nullopt;
  if (in_place != batched.returns().empty()) return std::nullopt;
  EntryPlan plan{*single, {}, {}, in_place};
  for (size_t i = 0; i < from.size(); ++i) {
    const std::string batched_type = from[i].type()->str(), single_type = to[i].type()->str();
    if (batched_type == "Tensor[]" && single_type == "Tensor") {
      plan.arguments.push_back(PerEntry::kListEntry);
    } else if (batched_type == "Scalar[]" && single_type == "Scalar") {
      plan.arguments.push_back(PerEntry::kScalarListEntry);
    } else if (batched_type == single_type &&
               (single_type == "Scalar" || single_type == "Tensor")) {
      plan.arguments.push_back(PerEntry::kShared);
    } else {
      return std::nullopt;
    }
  }
  if (plan.arguments.empty() || plan.arguments[0] != PerEntry::kListEntry) return std::nullopt;
  for (size_t i = from.size(); i < to.size(); ++i) {
    if (!to[i].default_value()) return std::nullopt;
    plan.trailing.push_back(*to[i].default_value());
  }
  return plan;
}

bool FloatDType(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

// A tensor an entry may read as self's partner: on tpu, of self's dtype and shape (or a 0-d
// value), dense and without lazy conjugate or negative bits, and either self's very elements or
// none of them (PyTorch refuses an in-place op whose input partly overlaps its output).
bool PartnerOf(const at::Tensor& t, const at::Tensor& self) {
  return t.defined() && t.is_privateuseone() && t.scalar_type() == self.scalar_type() &&
         (t.dim() == 0 || t.sizes() == self.sizes()) && t.is_contiguous() && !t.is_conj() &&
         !t.is_neg() &&
         (!t.is_alias_of(self) ||
          (t.storage_offset() == self.storage_offset() && t.sizes() == self.sizes()));
}

bool RealScalar(const c10::IValue& v) { return v.isDouble() || v.isInt(); }

// Whether the single op has a lowering and every entry falls in the case PlanEntries is for;
// checked before anything is recorded.
bool EntriesQualify(const EntryPlan& plan, const c10::Stack& stack, size_t begin, size_t& count) {
  if (!HasLowering(plan.op)) return false;
  const auto selves = stack[begin].toTensorList();
  count = selves.size();
  for (const at::Tensor self : selves) {
    if (!PartnerOf(self, self) || !FloatDType(self.scalar_type())) return false;
  }
  for (size_t a = 1; a < plan.arguments.size(); ++a) {
    const c10::IValue& v = stack[begin + a];
    switch (plan.arguments[a]) {
      case PerEntry::kListEntry: {
        const auto list = v.toTensorList();
        if (list.size() != count) return false;
        for (size_t i = 0; i < count; ++i) {
          if (!PartnerOf(list[i], selves[i])) return false;
        }
        break;
      }
      case PerEntry::kScalarListEntry: {
        const auto list = v.toListRef();
        if (list.size() != count) return false;
        for (const auto& item : list) {
          if (!RealScalar(item)) return false;
        }
        break;
      }
      case PerEntry::kShared:
        if (v.isTensor()) {
          for (const at::Tensor self : selves) {
            if (!PartnerOf(v.toTensor(), self)) return false;
          }
        } else if (!RealScalar(v)) {
          return false;
        }
        break;
    }
  }
  return count > 0;
}

// The plans, made when the extension loads, looked up by schema (read-only afterwards).
std::unordered_map<const c10::FunctionSchema*, EntryPlan>& Plans() {
  static std::unordered_map<const c10::FunctionSchema*, EntryPlan> plans;
  return plans;
}

// Records each entry's single op; false, having recorded nothing, outside the planned case.
bool RecordEntries(const c10::OperatorHandle& op, c10::Stack* stack) {
  const auto found = Plans().find(&op.schema());
  if (found == Plans().end()) return false;
  const EntryPlan& plan = found->second;
  const size_t begin = stack->size() - plan.arguments.size();
  size_t count = 0;
  if (!EntriesQualify(plan, *stack, begin, count)) return false;
  const auto selves = (*stack)[begin].toTensorList();
  c10::List<at::Tensor> results;
  c10::Stack entry;
  for (size_t i = 0; i < count; ++i) {
    entry.clear();
    for (size_t a = 0; a < plan.arguments.size(); ++a) {
      const c10::IValue& v = (*stack)[begin + a];
      switch (plan.arguments[a]) {
        case PerEntry::kListEntry:
          entry.emplace_back(v.toTensorList().get(i));
          break;
        case PerEntry::kScalarListEntry:
          entry.push_back(v.toListRef()[i]);
          break;
        case PerEntry::kShared:
          entry.push_back(v);
          break;
      }
    }
    entry.insert(entry.end(), plan.trailing.begin(), plan.trailing.end());
    RecordShapedLike(plan.op, &entry, selves[i]);
    if (!plan.in_place) results.push_back(entry.back().toTensor());
  }
  stack->erase(stack->begin() + begin, stack->end());
  if (!plan.in_place) stack->emplace_back(std::move(results));
  return true;
}

void BatchedOpKernel(const c10::OperatorHandle& op, c10::Stack* stack) {
  StartRecording();
  exec::DeferredScope scope;
  if (!RecordEntries(op, stack))
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  Translate([&] {
    scope.Close("batched op");
    return 0;
  });
}

// Registered when the extension loads: by then libtorch has registered every aten op.
struct BatchedOpRegistration {
  std::unique_ptr<torch::Library> library;
  BatchedOpRegistration() {
    library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                               c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
      std::string qualified = name.name.substr(6);
      if (!name.overload_name.empty()) qualified += "." + name.overload_name;
      library->impl(qualified.c_str(),
                    torch::CppFunction::makeFromBoxedFunction<&BatchedOpKernel>());
      const auto handle = c10::Dispatcher::singleton().findOp(name);
      if (!handle) continue;
      if (std::optional<EntryPlan> plan = PlanEntries(handle->schema())) {
        Plans().emplace(&handle->schema(), std::move(*plan));
      }
    }
  }
};

const BatchedOpRegistration kBatchedOps;

}  // namespace

}  // namespace torch_tpu::aten
