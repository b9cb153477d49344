#include "aten/meta_cache.h"

#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace torch_tpu::aten {
namespace {

template <typename T>
void Append(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void AppendInts(std::string& key, c10::IntArrayRef values) {
  Append(key, values.size());
  key.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
}

// Everything a meta function can see of a tensor: not its values, nor its storage.
void AppendTensor(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key.push_back('u');
    return;
  }
  key.push_back('t');
  Append(key, t.device().type());
  Append(key, t.device().index());
  Append(key, t.scalar_type());
  Append(key, t.unsafeGetTensorImpl()->is_wrapped_number());
  AppendInts(key, t.sizes());
  AppendInts(key, t.strides());
}

// Ops whose meta functions read their Scalar arguments' kinds (bool, integer, float), never their
// values: the arithmetic that a loop passes changing numbers to (a learning rate, Adam's step size
// and bias corrections, a position). Keyed by kind alone, a new value does not run the Python meta
// function again (about 100 us an op). Every other op keys the values: arange sizes its result by
// them, and checks such as pow's, renorm's or histc's read them.
bool ScalarValuesUnread(const c10::FunctionSchema& schema) {
  static const auto* names = new std::unordered_set<std::string_view>{
      "aten::add",      "aten::add_",    "aten::sub",      "aten::sub_", "aten::rsub",
      "aten::mul",      "aten::mul_",    "aten::div",      "aten::div_", "aten::addcmul",
      "aten::addcmul_", "aten::addcdiv", "aten::addcdiv_", "aten::lerp", "aten::lerp_"};
  return names->count(schema.name()) != 0;
}

bool IsScalarArgument(const c10::Argument& argument) {
  return argument.type()->kind() == c10::TypeKind::NumberType;
}

bool AppendValue(std::string& key, const c10::IValue& v) {
  if (v.isNone()) {
    key.push_back('n');
  } else if (v.isTensor()) {
    AppendTensor(key, v.toTensor());
  } else if (v.isTensorList()) {
    key.push_back('L');
    Append(key, v.toTensorList().size());
    for (const at::Tensor& t : v.toTensorList()) AppendTensor(key, t);
  } else if (v.isOptionalTensorList()) {
    key.push_back('O');
    Append(key, v.toOptionalTensorList().size());
    for (const auto& item : v.toOptionalTensorList()) {
      std::optional<at::Tensor> t = item;
      AppendTensor(key, t ? *t : at::Tensor());
    }
  } else if (v.isDouble()) {
    // Values count too: some checks read them (pow's negative integer exponents, clamp bounds).
    key.push_back('d');
    Append(key, v.toDouble());
  } else if (v.isInt()) {
    key.push_back('i');
    Append(key, v.toInt());
  } else if (v.isBool()) {
    key.push_back('b');
    Append(key, v.toBool());
  } else if (v.isIntList()) {
    key.push_back('I');
    AppendInts(key, v.toIntVector());
  } else if (v.isString()) {
    key.push_back('s');
    const std::string& text = v.toStringRef();
    Append(key, text.size());
    key.append(text);
  } else if (v.isGenerator()) {
    key.push_back('g');
  } else if (v.isDevice()) {
    key.push_back('D');
    Append(key, v.toDevice().type());
    Append(key, v.toDevice().index());
  } else if (v.isScalar()) {  // complex or symbolic scalars
    return false;
  } else if (v.isList()) {
    key.push_back('l');
    Append(key, v.toList().size());
    for (const c10::IValue& item : v.toList()) {
      if (!AppendValue(key, item)) return false;
    }
  } else {
    return false;
  }
  return true;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const MetaOutputs>> entries;
};

Cache& GetCache() {
  static auto* cache = new Cache();
  return *cache;
}

// Keys hold only metadata, but shapes can vary without bound in some programs.
constexpr size_t kMaxEntries = 1 << 16;

// arange's meta function sizes its result by (end - start) / step, so keyed by that difference a
// range that slides along (a decoding step's positions) is one entry. Only where the difference
// alone decides: integer bounds, or a floating result (its size is computed in double). Integer
// results of float bounds truncate each bound first, so they stay keyed by value.
bool AppendSlidingRangeKey(const c10::Stack& args, std::string& key) {
  if (args.size() != 4 || !args[3].isTensor()) return false;
  const c10::IValue& start = args[0];
  const c10::IValue& end = args[1];
  if (start.isInt() && end.isInt()) {
    int64_t span = 0;
    if (__builtin_sub_overflow(end.toInt(), start.toInt(), &span)) return false;
    key.push_back('R');
    Append(key, span);
  } else if (at::isFloatingType(args[3].toTensor().scalar_type()) &&
             (start.isInt() || start.isDouble()) && (end.isInt() || end.isDouble())) {
    auto as_double = [](const c10::IValue& v) {
      return v.isInt() ? static_cast<double>(v.toInt()) : v.toDouble();
    };
    key.push_back('r');
    Append(key, as_double(end) - as_double(start));
  } else {
    return false;
  }
  return AppendValue(key, args[2]) && AppendValue(key, args[3]);
}

// How an op's key treats its values, decided once per op rather than on every call.
struct KeyRules {
  bool sliding_range = false;         // arange.start_out
  bool scalar_values_unread = false;  // ScalarValuesUnread
};

const KeyRules& RulesFor(const c10::FunctionSchema& schema) {
  thread_local std::unordered_map<const c10::FunctionSchema*, KeyRules> rules;
  auto [entry, added] = rules.try_emplace(&schema);
  if (added) {
    entry->second.sliding_range =
        schema.name() == "aten::arange" && schema.overload_name() == "start_out";
    entry->second.scalar_values_unread = ScalarValuesUnread(schema);
  }
  return entry->second;
}

}  // namespace

bool MetaKey(const c10::OperatorHandle& op, const c10::Stack& args, std::string& key) {
  key.clear();
  const c10::FunctionSchema& schema = op.schema();
  Append(key, &schema);  // schemas live as long as the process
  const KeyRules& rules = RulesFor(schema);
  if (rules.sliding_range) {
    if (AppendSlidingRangeKey(args, key)) return true;
    key.resize(sizeof(&schema));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (rules.scalar_values_unread && (v.isDouble() || v.isInt()) &&
        i < schema.arguments().size() && IsScalarArgument(schema.arguments()[i])) {
      key.push_back(v.isDouble() ? 'f' : 'z');  // a float or an integer Scalar, whatever its value
      continue;
    }
    if (!AppendValue(key, v)) return false;
  }
  return true;
}

std::shared_ptr<const MetaOutputs> FindMeta(const std::string& key) {
  Cache& cache = GetCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto found = cache.entries.find(key);
  return found == cache.entries.end() ? nullptr : found->second;
}

void StoreMeta(const std::string& key, std::shared_ptr<const MetaOutputs> outputs) {
  Cache& cache = GetCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.entries.size() >= kMaxEntries) cache.entries.clear();
  cache.entries.emplace(key, std::move(outputs));
}

}  // namespace torch_tpu::aten
