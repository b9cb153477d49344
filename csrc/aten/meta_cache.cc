#include "aten/meta_cache.h"

#include <mutex>
#include <unordered_map>

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

}  // namespace

bool MetaKey(const c10::OperatorHandle& op, const c10::Stack& args, std::string& key) {
  key.clear();
  Append(key, &op.schema());  // schemas live as long as the process
  for (const c10::IValue& v : args) {
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
