// The one boxed kernel behind every lowered op. For each call it runs PyTorch's own meta
// function (same argument checks and messages, output shapes and dtypes, out= resizing), reads
// the arguments as graph values, calls the op's lowering, and writes the results through the
// output tensors' views. Functional, in-place and out= variants share one lowering.
#include "aten/fallback.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/full.h>
#include <c10/util/hash.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "aten/device_checks.h"
#include "aten/generator.h"
#include "aten/meta_cache.h"
#include "aten/tpu_tensor.h"
#include "exec/bucketing.h"
#include "exec/context.h"
#include "exec/graph_plan.h"
#include "exec/pending.h"
#include "ops/builder.h"
#include "ops/growing.h"
#include "ops/target.h"

namespace torch_tpu::aten {

namespace {

std::string LoweringName(const c10::OperatorName& name) {
  std::string base = name.name;
  if (base.rfind("aten::", 0) == 0) base = base.substr(6);
  const bool dunder = base.size() > 4 && base.rfind("__", 0) == 0;
  if (!dunder && base.size() > 1 && base.back() == '_') base.pop_back();  // add_ -> add
  return base;
}

// An op's lowering name and lowering, resolved once per op (per thread, without a lock): every
// call of the op would otherwise build the name and look it up again. Ops without a lowering yet
// are not remembered, as custom kernels may register theirs later.
struct ResolvedOp {
  std::string name;
  ops::Lowering lowering = nullptr;
  bool checked = false;  // an op with device-side checks of its arguments (device_checks.h)
};

// Null when the op has no lowering.
const ResolvedOp* Resolve(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, ResolvedOp> resolved;
  const c10::FunctionSchema* key = &op.schema();
  if (auto found = resolved.find(key); found != resolved.end()) return &found->second;
  std::string name = LoweringName(op.operator_name());
  const ops::Lowering lowering = ops::FindLowering(name);
  if (lowering == nullptr) return nullptr;
  const bool checked = IsCheckedOp(name);
  return &resolved.emplace(key, ResolvedOp{std::move(name), lowering, checked}).first->second;
}

std::string QualifiedName(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

std::string DTypesOf(const c10::Stack& stack, size_t begin) {
  std::string dtypes;
  for (size_t i = begin; i < stack.size(); ++i) {
    auto add = [&](const at::Tensor& t) {
      if (!t.defined()) return;
      std::string name = c10::toString(t.scalar_type());
      if (dtypes.find(name) == std::string::npos) dtypes += (dtypes.empty() ? "" : ", ") + name;
    };
    if (stack[i].isTensor()) add(stack[i].toTensor());
    if (stack[i].isTensorList())
      for (const auto& t : stack[i].toTensorList()) add(t);
  }
  return dtypes.empty() ? "none" : dtypes;
}

bool CpuFallbackEnabled() {
  const char* value = std::getenv("TORCH_TPU_CPU_FALLBACK");
  return value != nullptr && std::string(value) == "1";
}

c10::IValue ToDevice(const c10::IValue& value,
                     const std::function<at::Tensor(const at::Tensor&)>& move) {
  if (value.isTensor()) return move(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const auto& t : value.toTensorList()) list.push_back(move(t));
    return list;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> list;
    for (const auto& t : value.toOptionalTensorList()) {
      std::optional<at::Tensor> item = t;
      list.push_back(item && item->defined() ? std::optional<at::Tensor>(move(*item))
                                             : std::nullopt);
    }
    return list;
  }
  return value;
}

// Runs the op on the CPU and copies results (and in-place/out= arguments) back.
void CpuFallback(const c10::OperatorHandle& op, c10::Stack* stack) {
  const std::string name = QualifiedName(op);
  {
    static std::mutex mutex;
    static std::unordered_set<std::string> warned;
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(name).second) {
      TORCH_WARN("torch_tpu: ", name,
                 " is not implemented for the tpu device; running it on the CPU "
                 "(TORCH_TPU_CPU_FALLBACK=1). This copies its tensors to the host and back.");
    }
  }
  exec::GetMetrics().CountFallback(name);
  Translate([] {
    exec::MaterializeAllPending("cpu fallback");
    return 0;
  });
  const auto& schema = op.schema();
  const size_t num_arguments = schema.arguments().size();
  const size_t begin = stack->size() - num_arguments;
  std::vector<c10::IValue> originals(stack->begin() + begin, stack->end());
  c10::Device device(c10::DeviceType::PrivateUse1, CurrentDeviceIndex());
  for (size_t i = begin; i < stack->size(); ++i) {
    (*stack)[i] = ToDevice((*stack)[i], [&](const at::Tensor& t) {
      if (t.defined() && t.is_privateuseone()) {
        device = t.device();
        return t.cpu();
      }
      return t;
    });
  }
  std::vector<c10::IValue> cpu_arguments(stack->begin() + begin, stack->end());
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  // Mutated arguments: copy the CPU result back into the tpu tensor.
  for (size_t i = 0; i < num_arguments; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || !originals[i].isTensor()) continue;
    at::Tensor target = originals[i].toTensor();
    if (target.is_privateuseone()) {
      const at::Tensor& cpu = cpu_arguments[i].toTensor();
      if (target.sizes() != cpu.sizes()) ResizeTpu(target, cpu.sizes(), std::nullopt);
      target.copy_(cpu);
    }
  }
  const size_t num_returns = schema.returns().size();
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& value = (*stack)[stack->size() - num_returns + r];
    const auto* alias = schema.returns()[r].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < num_arguments; ++i) {
        const auto* arg_alias = schema.arguments()[i].alias_info();
        if (arg_alias != nullptr && arg_alias->beforeSets() == alias->beforeSets())
          value = originals[i];
      }
      continue;
    }
    value = ToDevice(value, [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; });
  }
}

}  // namespace

// "aten::add.Tensor at train.py:12", interned per op and line as the line is (exec/context.h).
// Consecutive nodes with one origin replay as one op, which for the same op at the same line
// names the same thing.
std::shared_ptr<const std::string> RecordingSite(const c10::OperatorHandle& op) {
  exec::SourceLocation location = exec::CurrentSourceLocation();
  struct Site {
    exec::SourceLocation location;  // held, so the key's address is not reused
    std::shared_ptr<const std::string> text;
  };
  using Key = std::pair<const c10::FunctionSchema*, const std::string*>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return c10::hash_combine(std::hash<const void*>()(k.first),
                               std::hash<const void*>()(k.second));
    }
  };
  thread_local std::unordered_map<Key, Site, KeyHash> sites;
  if (sites.size() >= 65536) sites.clear();
  Site& site = sites[Key{&op.schema(), location.get()}];
  if (site.text == nullptr) {
    site.text = std::make_shared<const std::string>(QualifiedName(op) +
                                                    (location ? " at " + *location : ""));
    site.location = std::move(location);
  }
  return site.text;
}

namespace {

// TORCH_TPU_COMPLEX_UNCHECKED=1 lets complex reach every lowering: only for finding, with the
// conformance harness (tools/conformance.py --dtypes complex64), which ones to check and list.
bool ComplexUnchecked() {
  static const bool unchecked = [] {
    const char* value = std::getenv("TORCH_TPU_COMPLEX_UNCHECKED");
    return value != nullptr && std::string(value) == "1";
  }();
  return unchecked;
}

bool HasComplex(const ops::LoweringContext& ctx) {
  for (const ir::TensorType& t : ctx.outputs) {
    if (ir::IsComplex(t.dtype)) return true;
  }
  for (const ops::Argument& a : ctx.args) {
    if (a.kind == ops::Argument::Kind::kTensor && ir::IsComplex(a.tensor.dtype())) return true;
    for (const ir::Value& t : a.tensors) {
      if (t && ir::IsComplex(t.dtype())) return true;
    }
  }
  return false;
}

[[noreturn]] void ReportUnsupported(const c10::OperatorHandle& op, const c10::Stack& stack,
                                    size_t begin, const std::string& detail) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "The operator '", QualifiedName(op),
      "' is not currently implemented for the tpu device (dtypes: ", DTypesOf(stack, begin), ")",
      detail.empty() ? "" : ": " + detail,
      ". As a temporary workaround, set the environment variable TORCH_TPU_CPU_FALLBACK=1 "
      "to run it on the CPU (it warns once per op and is counted in torch_tpu.metrics).");
}

at::Tensor ToMeta(const at::Tensor& t) {
  if (!t.defined()) return t;
  // Wrapped Python numbers stay on the CPU (meta functions may read their value); other 0-d CPU
  // tensors, which mix with any device in PyTorch, become meta so Python meta functions that
  // compare devices (masked_fill's) accept them as the CPU and CUDA kernels do.
  if (t.is_cpu() && t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
  at::Tensor meta = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  return meta;
}

bool IsType(const c10::TypePtr& type, c10::TypeKind kind) {
  if (type->kind() == kind) return true;
  if (auto optional = type->cast<c10::OptionalType>())
    return optional->getElementType()->kind() == kind;
  return false;
}

// The device the op runs on; checks every tensor is on it (CPU scalars excepted).
c10::Device OpDevice(const c10::Stack& stack, size_t begin) {
  std::optional<c10::Device> device;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return;
    if (!device) {
      device = t.device();
      return;
    }
    TORCH_CHECK(t.device() == *device,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *device, " and ", t.device(), "!");
  };
  for (size_t i = begin; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor())
      visit(v.toTensor());
    else if (v.isTensorList())
      for (const auto& t : v.toTensorList()) visit(t);
    else if (v.isOptionalTensorList())
      for (const auto& t : v.toOptionalTensorList()) {
        std::optional<at::Tensor> item = t;
        if (item) visit(*item);
      }
  }
  return device.value_or(c10::Device(c10::DeviceType::PrivateUse1, CurrentDeviceIndex()));
}

void UpdatePromotion(at::native::ResultTypeState& state, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined()) state = at::native::update_result_type_state(t, state);
  } else if (v.isScalar()) {
    state = at::native::update_result_type_state(v.toScalar(), state);
  } else if (v.isTensorList()) {
    for (const auto& t : v.toTensorList()) state = at::native::update_result_type_state(t, state);
  }
}

// PyTorch's Conjugate and Negative keys fall through for the ops whose kernels resolve lazy bits
// themselves (mm, dot, vdot, addmm, baddbmm, ...), so a tensor may reach a lowering with its
// conjugate or negative bit set. Lowerings see, and write, the tensor's logical values; both
// transforms are involutions, so one function serves reads and writes.
ir::Value WithLazyBits(const at::Tensor& t, ir::Value v) {
  if (t.is_conj() && ir::IsComplex(v.dtype()))
    v = ops::MakeComplex(ops::Real(v), ops::Neg(ops::Imag(v)));
  if (t.is_neg()) v = ops::Neg(v);
  return v;
}

ir::Value ReadLogical(const at::Tensor& t) { return WithLazyBits(t, ReadTensor(t)); }

ops::Argument ToArgument(const c10::Argument& schema_arg, const c10::IValue& v,
                         c10::DeviceIndex device) {
  ops::Argument a;
  using Kind = ops::Argument::Kind;
  if (v.isNone()) return a;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return a;
    a.kind = Kind::kTensor;
    a.contiguous = t.is_contiguous();
    if (t.is_cpu() && t.dim() == 0) {
      // A wrapped number: its value is read once, for the scalar and for the parameter.
      a.host_scalar = true;
      a.scalar = ToScalar(t.item());
      a.tensor = WithLazyBits(t, HostScalarParameter(t, a.scalar));
    } else {
      a.tensor = ReadLogical(t);
      if (ops::GrowingValue grown = ReadGrowing(t)) a.growing = {grown};
    }
  } else if (v.isTensorList()) {
    a.kind = Kind::kTensorList;
    const auto list = v.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) {
      const at::Tensor t = list[i];
      a.tensors.push_back(ReadLogical(t));
      if (ops::GrowingValue grown = ReadGrowing(t)) {
        a.growing.resize(list.size());
        a.growing[i] = grown;
      }
    }
  } else if (v.isOptionalTensorList()) {
    a.kind = Kind::kTensorList;
    const auto list = v.toOptionalTensorList();
    for (size_t i = 0; i < list.size(); ++i) {
      std::optional<at::Tensor> item = list[i];
      const bool defined = item && item->defined();
      a.tensors.push_back(defined ? ReadLogical(*item) : ir::Value{});
      if (ops::GrowingValue grown = defined ? ReadGrowing(*item) : ops::GrowingValue{}) {
        a.growing.resize(list.size());
        a.growing[i] = grown;
      }
    }
  } else if (IsType(schema_arg.real_type(), c10::TypeKind::ScalarTypeType)) {
    a.kind = Kind::kDType;
    a.dtype = ToDType(static_cast<at::ScalarType>(v.toInt()));
  } else if (IsType(schema_arg.type(), c10::TypeKind::GeneratorType) || v.isGenerator()) {
    a.kind = Kind::kOther;
  } else if (v.isScalar()) {
    a.kind = v.isDouble() ? Kind::kDouble
             : v.isBool() ? Kind::kBool
             : v.isInt()  ? Kind::kInt
                          : Kind::kScalar;
    a.scalar = ToScalar(v.toScalar());
  } else if (v.isIntList()) {
    a.kind = Kind::kIntList;
    a.ints = v.toIntVector();
  } else if (v.isDoubleList()) {  // histogram's range and the like
    a.kind = Kind::kDoubleList;
    a.doubles = v.toDoubleVector();
  } else if (v.isSymIntList() || v.isList()) {
    a.kind = Kind::kIntList;
    for (const auto& item : v.toListRef()) {
      if (item.isInt())
        a.ints.push_back(item.toInt());
      else if (item.isSymInt())
        a.ints.push_back(item.toSymInt().guard_int(__FILE__, __LINE__));
      else
        a.kind = Kind::kOther;
    }
  } else if (v.isBoolList()) {  // output_mask and friends, as 0/1
    a.kind = Kind::kIntList;
    for (bool item : v.toBoolList()) a.ints.push_back(item ? 1 : 0);
  } else if (v.isString()) {
    a.kind = Kind::kString;
    a.text = v.toStringRef();
  } else {
    a.kind = Kind::kOther;
  }
  (void)device;
  return a;
}

// Random ops take the device generator's (seed, offset) as the last two arguments.
// Ops tagged nondeterministic_seeded without a Generator argument (native_dropout) draw from
// the device's default generator.
void AppendRandomKey(const c10::OperatorHandle& op, const c10::Stack& args, c10::DeviceIndex device,
                     ops::LoweringContext& ctx) {
  const auto& schema = op.schema();
  std::optional<size_t> generator_index;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (IsType(schema.arguments()[i].type(), c10::TypeKind::GeneratorType)) generator_index = i;
  }
  if (!generator_index && !op.hasTag(at::Tag::nondeterministic_seeded)) return;
  {
    const bool explicit_generator = generator_index && !args[*generator_index].isNone();
    at::Generator generator =
        explicit_generator ? args[*generator_index].toGenerator() : DefaultGenerator(device);
    auto* tpu = generator.get<TpuGenerator>();
    TORCH_CHECK(generator.device().type() == c10::DeviceType::PrivateUse1 && tpu != nullptr,
                "Expected a 'tpu' device type for generator but found '", generator.device().type(),
                "'");
    auto [seed, offset] = tpu->NextKey();
    if (exec::GraphCapture* capture = exec::ActiveGraphCapture()) {
      capture->NoteRandomDraw(
          {[generator] { return generator.get<TpuGenerator>()->NextKey(); }, seed, offset});
    }
    for (uint64_t word : {seed, offset}) {
      ops::Argument a;
      a.kind = ops::Argument::Kind::kInt;
      a.scalar.i = static_cast<int64_t>(word);
      ctx.args.push_back(a);
    }
    return;
  }
}

// As on CUDA, advanced indexing accepts index tensors on the CPU (x[:, torch.tensor([0])],
// index_put_): they are copied to the indexed tensor's device.
void MoveCpuIndicesToDevice(const c10::FunctionSchema& schema, c10::Stack& stack, size_t begin) {
  std::optional<c10::Device> device;
  for (size_t i = begin; i < stack.size() && !device; ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().is_privateuseone()) {
      device = stack[i].toTensor().device();
    }
  }
  if (!device) return;
  for (size_t i = begin; i < stack.size(); ++i) {
    if (schema.arguments()[i - begin].name() != "indices" || !stack[i].isOptionalTensorList()) {
      continue;
    }
    c10::List<std::optional<at::Tensor>> moved;
    for (const auto& item : stack[i].toOptionalTensorList()) {
      std::optional<at::Tensor> index = item;
      if (index && index->defined() && index->is_cpu()) index = index->to(*device);
      moved.push_back(index);
    }
    stack[i] = moved;
  }
}

// x[mask] has a data-dependent shape: boolean index tensors become the long indices of their
// true elements (a host read, as on CUDA), so the meta run and the lowering see fixed shapes.
void ExpandBooleanIndices(c10::Stack& stack, size_t begin) {
  for (size_t i = begin; i < stack.size(); ++i) {
    if (!stack[i].isOptionalTensorList()) continue;
    c10::List<std::optional<at::Tensor>> expanded;
    bool changed = false;
    for (const auto& item : stack[i].toOptionalTensorList()) {
      std::optional<at::Tensor> index = item;
      if (!index || !index->defined() ||
          (index->scalar_type() != at::kBool && index->scalar_type() != at::kByte)) {
        expanded.push_back(index);
        continue;
      }
      const at::Tensor positions = index->nonzero();  // [true elements, mask dims]
      for (int64_t d = 0; d < index->dim(); ++d) expanded.push_back(positions.select(1, d));
      changed = true;
    }
    if (changed) stack[i] = expanded;
  }
}

// The argument a result aliases and writes (in-place and out= ops), or -1 for a fresh result.
int WrittenArgument(const c10::FunctionSchema& schema, size_t result) {
  const auto* alias = schema.returns()[result].alias_info();
  if (alias == nullptr || !alias->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* arg_alias = schema.arguments()[i].alias_info();
    if (arg_alias != nullptr && arg_alias->beforeSets() == alias->beforeSets()) {
      return static_cast<int>(i);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "no argument aliases result ", result, " of ", schema.name());
}

bool WriteTargetsMatch(const c10::FunctionSchema& schema, const c10::Stack& args,
                       const std::vector<MetaOutput>& outputs) {
  for (size_t r = 0; r < outputs.size(); ++r) {
    const int i = WrittenArgument(schema, r);
    if (i < 0) continue;
    const at::Tensor& target = args[i].toTensor();
    // An empty target (a composite op's fresh out=, as arange's) is resized without a warning.
    if (target.numel() == 0) continue;
    if (target.sizes() != c10::IntArrayRef(outputs[r].sizes) ||
        target.strides() != c10::IntArrayRef(outputs[r].strides)) {
      return false;
    }
  }
  return true;
}

// An op's identity for fused mode's loop detection: its lowering and its outputs' dtypes, not
// their dims (a loop body whose sizes change is still the same body).
uint64_t StructuralHash(const std::string& lowering_name, const ops::LoweringContext& ctx) {
  uint64_t hash = std::hash<std::string>()(lowering_name);
  for (const auto& output : ctx.outputs) {
    hash = hash * 31 + static_cast<uint64_t>(output.dtype) + 1;
  }
  return hash;
}

// fill_ of a small tensor that is its whole storage, outside fused and compiled recording, is an
// upload of its values rather than a program: a program would take the scalar as an upload too,
// and its launch is what this saves (autograd's backward seed, small constants).
constexpr int64_t kUploadedFillBytes = 4096;

bool UploadSmallFill(const c10::FunctionSchema& schema, c10::Stack& stack, size_t begin) {
  if (schema.overload_name() != "Scalar") return false;
  const at::Tensor self = stack[begin].toTensor();
  // Deferred work records a fill as a node, which fuses with its readers. A one-element fill
  // outside a scope (autograd's seed of a backward, a counter) is uploaded in fused mode too: as
  // a node it would be a program of its own wherever it is the only work pending at a cut, such
  // as before a compiled backward graph.
  if (exec::Deferring() && (exec::InDeferredScope() || self.numel() != 1)) return false;
  const int64_t bytes = static_cast<int64_t>(self.nbytes());
  if (self.numel() == 0 || bytes > kUploadedFillBytes || !self.is_contiguous() ||
      self.storage_offset() != 0 || static_cast<int64_t>(self.storage().nbytes()) != bytes ||
      !IsSupportedDType(self.scalar_type())) {
    return false;
  }
  // The CPU's fill_ of the same dtype makes the values and raises the CPU's errors (overflow).
  CopyHostToTpu(self, at::full(self.sizes(), stack[begin + 1].toScalar(),
                               at::TensorOptions().dtype(self.scalar_type())));
  stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(begin), stack.end());
  stack.push_back(self);
  return true;
}

// out= tensors get the CPU's overlap checks: meta functions do not make them (in-place ops were
// checked before they reached us).
void CheckOutOverlaps(const c10::FunctionSchema& schema, const c10::Stack& args) {
  const size_t num_arguments = schema.arguments().size();
  for (size_t i = 0; i < num_arguments; ++i) {
    const auto& schema_arg = schema.arguments()[i];
    const auto* alias = schema_arg.alias_info();
    if (alias == nullptr || !alias->isWrite() || !schema_arg.kwarg_only() || !args[i].isTensor()) {
      continue;
    }
    const at::Tensor& out = args[i].toTensor();
    at::assert_no_internal_overlap(out);
    for (size_t j = 0; j < num_arguments; ++j) {
      const auto* input_alias = schema.arguments()[j].alias_info();
      if (j == i || !args[j].isTensor() || (input_alias != nullptr && input_alias->isWrite())) {
        continue;
      }
      at::assert_no_partial_overlap(out, args[j].toTensor());
    }
  }
}

// 1. PyTorch's meta function: argument checks, output shapes and dtypes, out= resizing.
// Memoized on the arguments' metadata (aten/meta_cache.h). Null: the op has no meta function
// and runs on the CPU.
std::shared_ptr<const MetaOutputs> RunMeta(const c10::OperatorHandle& op, const c10::Stack& args,
                                           const c10::Stack& stack, size_t begin) {
  const auto& schema = op.schema();
  thread_local std::string key;
  const bool keyed = MetaKey(op, args, key);
  if (keyed) {
    std::shared_ptr<const MetaOutputs> found = FindMeta(key);
    // A hit that would resize an out= argument runs the meta function anyway, for its warning.
    if (found && WriteTargetsMatch(schema, args, *found)) return found;
  }
  // The meta run may record other ops, which build keys of their own.
  const std::string stored_key = keyed ? key : std::string();
  exec::GetMetrics().meta_runs++;
  c10::Stack meta(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    // Generators do not affect shapes, and PyTorch's Python meta functions reject them.
    meta[i] = args[i].isGenerator() ? c10::IValue() : ToDevice(args[i], ToMeta);
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::NotImplementedError& e) {
    if (CpuFallbackEnabled()) return nullptr;
    ReportUnsupported(op, stack, begin, "it has no meta function");
  }
  auto outputs = std::make_shared<MetaOutputs>();
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    if (meta[r].isNone() || (meta[r].isTensor() && !meta[r].toTensor().defined())) {
      outputs->push_back({{}, {}, at::kFloat, /*defined=*/false});
      continue;
    }
    if (!meta[r].isTensor()) ReportUnsupported(op, stack, begin, "non-tensor results");
    const at::Tensor& m = meta[r].toTensor();
    outputs->push_back({m.sizes().vec(), m.strides().vec(), m.scalar_type()});
  }
  if (keyed) StoreMeta(stored_key, outputs);
  return outputs;
}

// 2. Output tensors: in-place/out= arguments (resized as the meta run did), or fresh ones. Their
// types go to ctx.outputs.
std::vector<at::Tensor> MakeOutputs(const c10::FunctionSchema& schema, const c10::Stack& args,
                                    const std::vector<MetaOutput>& meta_outputs, c10::Device device,
                                    ops::LoweringContext& ctx) {
  std::vector<at::Tensor> targets;
  targets.reserve(meta_outputs.size());
  ctx.outputs.reserve(meta_outputs.size());
  for (size_t r = 0; r < meta_outputs.size(); ++r) {
    const MetaOutput& m = meta_outputs[r];
    const int write_argument = WrittenArgument(schema, r);
    at::Tensor target;
    if (!m.defined) {
      targets.push_back(target);
      ctx.outputs.emplace_back();
      continue;
    }
    if (write_argument >= 0) {
      target = args[write_argument].toTensor();
      if (target.sizes() != c10::IntArrayRef(m.sizes) ||
          target.strides() != c10::IntArrayRef(m.strides)) {
        ResizeTpu(target, m.sizes, m.strides);
      }
    } else {
      target = EmptyTpu(m.sizes, m.strides, m.dtype, device.index());
    }
    targets.push_back(target);
    ctx.outputs.push_back(ir::TensorType{ToDType(m.dtype), ir::Shape(m.sizes)});
  }
  return targets;
}

// 3. Arguments as graph values (out= arguments are outputs, not inputs), with PyTorch's result
// type and, for random ops, the generator's key. Returns each ctx.args entry's schema argument.
std::vector<size_t> ReadArguments(const c10::OperatorHandle& op, const c10::Stack& args,
                                  c10::Device device, ops::LoweringContext& ctx) {
  const auto& schema = op.schema();
  at::native::ResultTypeState promotion{};
  std::vector<size_t> schema_index;
  schema_index.reserve(schema.arguments().size());
  ctx.args.reserve(schema.arguments().size());
  bool any_tensor = false;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto& schema_arg = schema.arguments()[i];
    const auto* alias = schema_arg.alias_info();
    if (alias != nullptr && alias->isWrite() && schema_arg.kwarg_only()) continue;
    schema_index.push_back(i);
    ctx.args.push_back(ToArgument(schema_arg, args[i], device.index()));
    UpdatePromotion(promotion, args[i]);
    any_tensor |= args[i].isTensor() || args[i].isTensorList();
  }
  if (any_tensor) {
    const at::ScalarType promoted = at::native::result_type(promotion);
    if (IsSupportedDType(promoted)) ctx.promoted = ToDType(promoted);
  }
  AppendRandomKey(op, args, device.index(), ctx);
  return schema_index;
}

// 4. Lower, then write each result through its output's view (a growing result as its padded
// layout when the output can take it). False: the lowering cannot take these arguments and the
// CPU must run the op.
bool LowerAndWrite(const c10::OperatorHandle& op, const ResolvedOp& resolved,
                   const c10::Stack& args, const std::vector<size_t>& schema_index,
                   const std::vector<at::Tensor>& targets, ops::LoweringContext& ctx,
                   const c10::Stack& stack, size_t begin) {
  // Deferred nodes remember what recorded them, to be named if their program fails.
  std::optional<ir::RecordingOrigin> origin;
  if (exec::Deferring()) origin.emplace(RecordingSite(op));
  std::vector<ir::Value> results;
  try {
    if (HasComplex(ctx) && !ComplexUnchecked() && !ops::AcceptsComplex(ctx.name)) {
      throw ops::UnsupportedError("complex64 is not supported by this op on tpu yet");
    }
    results = resolved.lowering(ctx);
    ops::LowerGrowing(ctx, resolved.lowering, results);
  } catch (const ops::UnsupportedError& e) {
    // The lowering exists but not for these arguments: the same path as a missing op.
    if (CpuFallbackEnabled()) return false;
    ReportUnsupported(op, stack, begin, e.what());
  }
  TORCH_INTERNAL_ASSERT(results.size() == targets.size(), "lowering of ", QualifiedName(op),
                        " returned ", results.size(), " values for ", targets.size(), " outputs");
  std::vector<exec::DeviceStorage*> written;
  // Before the results: debug mode raises a failed check at the op, with nothing written.
  if (resolved.checked) RecordDeviceChecks(op, args, schema_index, ctx, written);
  for (size_t r = 0; r < targets.size(); ++r) {
    if (!targets[r].defined() || targets[r].numel() == 0) continue;
    TORCH_INTERNAL_ASSERT(results[r].shape() == ctx.outputs[r].shape, "lowering of ",
                          QualifiedName(op), " produced shape ",
                          c10::IntArrayRef(results[r].shape()), ", expected ", targets[r].sizes());
    const bool grown = r < ctx.growing_results.size() && ctx.growing_results[r] &&
                       WriteGrowing(targets[r], ctx.growing_results[r]);
    if (!grown) WriteTensor(targets[r], WithLazyBits(targets[r], results[r]));
    written.push_back(StorageOf(targets[r]));
  }
  for (const auto& [index, value] : ctx.argument_writes) {
    const at::Tensor& target = args[schema_index.at(index)].toTensor();
    TORCH_INTERNAL_ASSERT(value.shape() == ir::Shape(target.sizes().vec()), "lowering of ",
                          QualifiedName(op), " wrote a value of the wrong shape");
    WriteTensor(target, WithLazyBits(target, value));
    written.push_back(StorageOf(target));
  }
  if (exec::DetectingLoops()) exec::NoteRecordedOp(StructuralHash(ctx.name, ctx));
  FinishWrites(written);
  return true;
}

// The lowerings learn which compiler they target from the device's platform, on the first op.
void ConfigureLoweringTarget() {
  static const bool configured = [] {
    ops::LoweringTarget target;
    target.row_major_bf16_dots = exec::GetClient().platform_name() == "cpu";
    ops::SetLoweringTarget(target);
    return true;
  }();
  (void)configured;
}

// An op's lowering arguments, in a vector whose capacity each thread keeps from op to op. With five
// arguments or more the vector passes 1 KiB, and glibc serves such a block only after merging all
// its recently freed small blocks (fast bins): a fresh vector per op did that for every addmm or
// layer norm recorded. A nested recording finds no kept vector and makes its own.
class KeptArguments {
 public:
  explicit KeptArguments(std::vector<ops::Argument>& args) : args_(args) { args_.swap(Kept()); }
  ~KeptArguments() {
    args_.clear();
    if (args_.capacity() > Kept().capacity()) args_.swap(Kept());
  }
  KeptArguments(const KeptArguments&) = delete;
  KeptArguments& operator=(const KeptArguments&) = delete;

 private:
  static std::vector<ops::Argument>& Kept() {
    thread_local std::vector<ops::Argument> kept;
    return kept;
  }
  std::vector<ops::Argument>& args_;
};

// Steps 2 to 4, given the op's outputs: replaces the op's arguments on the stack by its results.
void Record(const c10::OperatorHandle& op, const ResolvedOp& resolved, const c10::Stack& args,
            const std::vector<MetaOutput>& meta_outputs, c10::Device device, c10::Stack* stack,
            size_t begin) {
  ConfigureLoweringTarget();
  ops::LoweringContext ctx;
  const KeptArguments kept_arguments(ctx.args);
  ctx.name = resolved.name;
  ctx.overload = op.operator_name().overload_name;
  ctx.make_scalar_parameter = ScalarParameter;
  ctx.append_bucket = exec::AppendBucket;
  ctx.range_bucket = exec::RangeBucket;
  std::vector<at::Tensor> targets = MakeOutputs(op.schema(), args, meta_outputs, device, ctx);

  bool any_elements = false;
  for (const auto& t : targets) any_elements |= t.defined() && t.numel() > 0;
  if (any_elements) {
    const bool lowered = Translate([&] {
      const std::vector<size_t> schema_index = ReadArguments(op, args, device, ctx);
      return LowerAndWrite(op, resolved, args, schema_index, targets, ctx, *stack, begin);
    });
    if (!lowered) return CpuFallback(op, stack);
  }
  stack->erase(stack->begin() + begin, stack->end());
  for (auto& t : targets) stack->push_back(std::move(t));
}

void LoweringFallback(const c10::OperatorHandle& op, c10::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_arguments = schema.arguments().size();
  const size_t begin = stack->size() - num_arguments;
  const ResolvedOp* resolved = Resolve(op);
  if (resolved == nullptr) {
    if (CpuFallbackEnabled()) return CpuFallback(op, stack);
    ReportUnsupported(op, *stack, begin, "");
  }
  for (size_t i = begin; i < stack->size(); ++i) {
    auto check = [&](const at::Tensor& t) {
      // A Python complex number arrives as a complex128 0-d CPU tensor, read as complex64 (such
      // a tensor does not raise a complex64 operation's result type).
      const bool complex_number = t.defined() && t.is_cpu() && t.dim() == 0 && t.is_complex();
      if (t.defined() && !complex_number && !IsSupportedDType(t.scalar_type())) {
        if (CpuFallbackEnabled()) return false;
        ReportUnsupported(op, *stack, begin, "unsupported dtype");
      }
      return true;
    };
    const auto& v = (*stack)[i];
    if (v.isTensor() && !check(v.toTensor())) return CpuFallback(op, stack);
  }
  MoveCpuIndicesToDevice(schema, *stack, begin);
  StartRecording();
  const std::string& lowering_name = resolved->name;
  if (lowering_name == "index") ExpandBooleanIndices(*stack, begin);
  if (lowering_name == "fill" && UploadSmallFill(schema, *stack, begin)) return;
  const c10::Device device = OpDevice(*stack, begin);
  const c10::Stack args(stack->begin() + begin, stack->end());
  CheckOutOverlaps(schema, args);

  const std::shared_ptr<const MetaOutputs> meta_outputs = RunMeta(op, args, *stack, begin);
  if (!meta_outputs) return CpuFallback(op, stack);
  Record(op, *resolved, args, *meta_outputs, device, stack, begin);
}

}  // namespace

bool HasLowering(const c10::OperatorHandle& op) { return Resolve(op) != nullptr; }

void RecordThroughLowering(const c10::OperatorHandle& op, c10::Stack* stack) {
  LoweringFallback(op, stack);
}

void RecordShapedLike(const c10::OperatorHandle& op, c10::Stack* stack, const at::Tensor& like) {
  const ResolvedOp* resolved = Resolve(op);
  TORCH_INTERNAL_ASSERT(resolved != nullptr, QualifiedName(op), " has no lowering");
  const size_t begin = stack->size() - op.schema().arguments().size();
  const c10::Stack args(stack->begin() + begin, stack->end());
  const MetaOutputs outputs(
      op.schema().returns().size(),
      MetaOutput{like.sizes().vec(), like.strides().vec(), like.scalar_type()});
  Record(op, *resolved, args, outputs, like.device(), stack, begin);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&LoweringFallback>());
}

}  // namespace torch_tpu::aten

// PyTorch routes an out-of-tree backend's convolutions (after _convolution's argument checks) to
// convolution_overrideable and convolution_backward_overrideable, whose CompositeExplicitAutograd
// kernels only throw and would win over the fallback. They also lack meta functions: these give
// them the shapes of convolution's and convolution_backward's (masked gradients left undefined).
namespace torch_tpu::aten {
namespace {

at::Tensor ConvolutionOverrideableMeta(const at::Tensor& input, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias,
                                       c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                       c10::SymIntArrayRef dilation, bool transposed,
                                       c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  return at::convolution_symint(input, weight, bias, stride, padding, dilation, transposed,
                                output_padding, std::move(groups));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardOverrideableMeta(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  const c10::SymInt bias_size = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward_symint(
      grad_output, input, weight, c10::SymIntArrayRef(&bias_size, 1), stride, padding, dilation,
      transposed, output_padding, std::move(groups), output_mask);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

// cummax, cummin and logcumsumexp have CompositeExplicitAutograd kernels that call per-backend
// helpers (_cummax_helper, _logcumsumexp) with no meta functions, and mode's out= kernel accepts
// only CPU, CUDA and XPU tensors; conj_physical_'s calls a CPU/CUDA kernel stub; the fused
// attention backward's default kernel raises, waiting for a backend's; native_group_norm's
// decomposes into native_batch_norm and an addcmul in the input's dtype (group_norm has checked
// its arguments). Routed to the fallback, the public ops are lowered directly, with the shapes of
// PyTorch's meta functions.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"convolution_overrideable", "convolution_backward_overrideable", "cummax", "cummax.out",
        "cummin", "cummin.out", "logcumsumexp", "logcumsumexp.out", "mode.values", "conj_physical_",
        "_scaled_dot_product_fused_attention_overrideable_backward", "native_group_norm"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&LoweringFallback>());
  }
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("convolution_overrideable", TORCH_FN(ConvolutionOverrideableMeta));
  m.impl("convolution_backward_overrideable", TORCH_FN(ConvolutionBackwardOverrideableMeta));
}

}  // namespace torch_tpu::aten
