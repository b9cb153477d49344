#include "ir/graph.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "ir/function.h"

namespace torch_tpu::ir {

namespace {

struct DTypeInfo {
  const char* mlir;
  size_t bytes;
};

const DTypeInfo& Info(DType dtype) {
  static const DTypeInfo kInfo[] = {
      {"i1", 1},   {"i8", 1},   {"i16", 2},  {"i32", 4},          {"i64", 8},
      {"ui8", 1},  {"ui16", 2}, {"ui32", 4}, {"ui64", 8},         {"f16", 2},
      {"bf16", 2}, {"f32", 4},  {"f64", 8},  {"complex<f32>", 8},
  };
  return kInfo[static_cast<int>(dtype)];
}

}  // namespace

const char* MlirTypeName(DType dtype) { return Info(dtype).mlir; }
size_t ByteSize(DType dtype) { return Info(dtype).bytes; }
bool IsFloating(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16 || dtype == DType::kF32 ||
         dtype == DType::kF64;
}
bool IsComplex(DType dtype) { return dtype == DType::kC64; }
bool IsSignedInteger(DType dtype) {
  return dtype == DType::kS8 || dtype == DType::kS16 || dtype == DType::kS32 ||
         dtype == DType::kS64;
}
bool IsUnsignedInteger(DType dtype) {
  return dtype == DType::kU8 || dtype == DType::kU16 || dtype == DType::kU32 ||
         dtype == DType::kU64;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::ToMlir() const {
  std::string text = "tensor<";
  for (int64_t d : shape) text += std::to_string(d) + "x";
  text += MlirTypeName(dtype);
  text += ">";
  return text;
}

const TensorType& Value::type() const { return node->results.at(index); }

// ---- Builder ----

namespace {
thread_local std::shared_ptr<const std::string> g_origin;
}  // namespace

RecordingOrigin::RecordingOrigin(std::shared_ptr<const std::string> origin)
    : saved_(std::move(g_origin)) {
  g_origin = std::move(origin);
}

RecordingOrigin::~RecordingOrigin() { g_origin = std::move(saved_); }

namespace {
Signature StructureOf(const Node& node);  // ---- Hashing ----

std::shared_ptr<Node> NewOpNode(std::string_view op, std::vector<Value> operands,
                                std::vector<TensorType> results, std::string attributes,
                                std::vector<Region> regions = {},
                                std::shared_ptr<const Function> callee = nullptr) {
  auto node = std::make_shared<Node>();
  node->op = InternOpName(op);
  node->operands = std::move(operands);
  node->results = std::move(results);
  node->attributes = std::move(attributes);
  node->regions = std::move(regions);
  node->callee = std::move(callee);
  node->origin = g_origin;
  node->structure = StructureOf(*node);
  return node;
}
}  // namespace

const OpName* InternOpName(std::string_view text) {
  thread_local std::unordered_map<std::string_view, const OpName*> known;
  if (auto it = known.find(text); it != known.end()) return it->second;
  static std::mutex mutex;
  // Never destroyed: nodes may outlive static destruction.
  static auto* names = new std::unordered_map<std::string_view, std::unique_ptr<OpName>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = names->find(text);
  if (it == names->end()) {
    auto name = std::make_unique<OpName>();
    name->text = std::string(text);
    Hasher h;
    h.Add(name->text);
    name->hash = h.Finish();
    it = names->emplace(std::string_view(name->text), std::move(name)).first;
  }
  known.emplace(it->first, it->second.get());
  return it->second.get();
}

std::vector<Value> MakeMultiOp(std::string_view op, std::vector<Value> operands,
                               std::vector<TensorType> results, std::string attributes,
                               std::vector<Region> regions,
                               std::shared_ptr<const Function> callee) {
  auto node = NewOpNode(op, std::move(operands), std::move(results), std::move(attributes),
                        std::move(regions), std::move(callee));
  std::vector<Value> values;
  values.reserve(node->results.size());
  for (size_t i = 0; i < node->results.size(); ++i) {
    values.push_back(Value{node, static_cast<int>(i)});
  }
  return values;
}

// Most nodes have one result: no vector of values on the way (one allocation less per node).
Value MakeOp(std::string_view op, std::vector<Value> operands, TensorType result,
             std::string attributes) {
  std::vector<TensorType> results;
  results.reserve(1);
  results.push_back(std::move(result));
  return Value{NewOpNode(op, std::move(operands), std::move(results), std::move(attributes)), 0};
}

Value MakeBufferParameter(std::shared_ptr<const void> buffer, TensorType type) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kBufferParameter;
  node->buffer = std::move(buffer);
  node->results = {std::move(type)};
  return Value{node, 0};
}

Value MakeScalarParameter(const HostScalar& scalar) {
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kScalarParameter;
  node->scalar = scalar;
  node->results = {TensorType{scalar.dtype, {}}};
  return Value{node, 0};
}

std::string I64List(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string I64Array(const std::vector<int64_t>& values) {
  if (values.empty()) return "array<i64>";
  std::string text = "array<i64: ";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + ">";
}

std::string DenseI64(const std::vector<int64_t>& values) {
  return "dense<" + I64List(values) + "> : tensor<" + std::to_string(values.size()) + "xi64>";
}

namespace {

std::string HexBits(uint64_t bits, int hex_digits) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "0x%0*llX", hex_digits,
                static_cast<unsigned long long>(bits));
  return buffer;
}

Value SplatConstant(const std::string& literal, DType dtype) {
  TensorType type{dtype, {}};
  return MakeOp("stablehlo.constant", {}, type,
                "value = dense<" + literal + "> : " + type.ToMlir());
}

Value MakeScalarConstant(double value, DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return SplatConstant(value != 0 ? "true" : "false", dtype);
    case DType::kF64: {
      uint64_t bits;
      std::memcpy(&bits, &value, 8);
      return SplatConstant(HexBits(bits, 16), dtype);
    }
    case DType::kF32: {
      float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return SplatConstant(HexBits(bits, 8), dtype);
    }
    case DType::kF16:
    case DType::kBF16:
      // Rounded by the compiler's own (round-to-nearest-even) conversion.
      return MakeOp("stablehlo.convert", {ScalarConstant(value, DType::kF32)},
                    TensorType{dtype, {}});
    case DType::kC64:
      return MakeOp("stablehlo.complex",
                    {ScalarConstant(value, DType::kF32), ScalarConstant(0, DType::kF32)},
                    TensorType{dtype, {}});
    default:
      return IntegerConstant(static_cast<int64_t>(value), dtype);
  }
}

Value MakeIntegerConstant(int64_t value, DType dtype) {
  if (dtype == DType::kBool) return SplatConstant(value != 0 ? "true" : "false", dtype);
  if (IsUnsignedInteger(dtype)) {
    const int bits = static_cast<int>(ByteSize(dtype) * 8);
    uint64_t u = static_cast<uint64_t>(value);
    if (bits < 64) u &= (uint64_t{1} << bits) - 1;
    return SplatConstant(std::to_string(u), dtype);
  }
  return SplatConstant(std::to_string(value), dtype);
}

// Lowerings make the same few constants (0, 1, -inf, a dtype's limits) over and over; each new
// one costs text formatting, allocations and a structure hash. They are shared per thread, and
// made outside any op's origin (a constant never fails).
template <typename Make>
Value SharedConstant(DType dtype, bool integer, uint64_t bits, Make&& make) {
  struct Key {
    uint64_t bits;
    uint16_t type;
    bool operator==(const Key& other) const { return bits == other.bits && type == other.type; }
  };
  struct KeyHash {
    size_t operator()(const Key& key) const {
      return static_cast<size_t>(Hasher::Mix(key.bits ^ (uint64_t{key.type} << 48)));
    }
  };
  constexpr size_t kMaxShared = 1024;  // a bound for code that makes ever-new constants
  thread_local std::unordered_map<Key, Value, KeyHash> shared;
  const Key key{bits, static_cast<uint16_t>(static_cast<unsigned>(dtype) << 1 | integer)};
  if (auto it = shared.find(key); it != shared.end()) return it->second;
  if (shared.size() >= kMaxShared) shared.clear();
  RecordingOrigin no_origin(nullptr);
  Value value = make();
  shared.emplace(key, value);
  return value;
}

}  // namespace

Value ScalarConstant(double value, DType dtype) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return SharedConstant(dtype, false, bits, [&] { return MakeScalarConstant(value, dtype); });
}

Value IntegerConstant(int64_t value, DType dtype) {
  if (IsFloating(dtype) || IsComplex(dtype))
    return ScalarConstant(static_cast<double>(value), dtype);
  return SharedConstant(dtype, true, static_cast<uint64_t>(value),
                        [&] { return MakeIntegerConstant(value, dtype); });
}

Value HostScalarConstant(const HostScalar& scalar) {
  auto read = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, scalar.bytes, sizeof(v));
    return v;
  };
  switch (scalar.dtype) {
    case DType::kBool:
      return IntegerConstant(scalar.bytes[0] != 0, DType::kBool);
    case DType::kS8:
      return IntegerConstant(read(int8_t{}), scalar.dtype);
    case DType::kS16:
      return IntegerConstant(read(int16_t{}), scalar.dtype);
    case DType::kS32:
      return IntegerConstant(read(int32_t{}), scalar.dtype);
    case DType::kS64:
      return IntegerConstant(read(int64_t{}), scalar.dtype);
    case DType::kU8:
      return IntegerConstant(read(uint8_t{}), scalar.dtype);
    case DType::kF32:
      return ScalarConstant(read(float{}), scalar.dtype);
    case DType::kF64:
      return ScalarConstant(read(double{}), scalar.dtype);
    default:
      return MakeScalarParameter(scalar);
  }
}

Value Full(double value, const TensorType& type) {
  Value scalar = ScalarConstant(value, type.dtype);
  if (type.shape.empty()) return scalar;
  return MakeOp("stablehlo.broadcast_in_dim", {scalar}, type, "broadcast_dimensions = array<i64>");
}

// ---- Programs ----

namespace {

// Node -> small integer, open addressing over a flat array: a cut looks up every node and
// operand, and a node-based map's allocation per entry was most of a cut's host time.
class NodeIds {
 public:
  explicit NodeIds(size_t expected = 0) {
    size_t capacity = 16;  // a reducer region has a few nodes
    while (capacity < 2 * expected) capacity *= 2;
    slots_.assign(capacity, Slot{});
  }
  size_t size() const { return size_; }
  // The node's id, 0 when it has none.
  uint64_t Find(const Node* node) const {
    for (size_t i = Home(node);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].node == node) return slots_[i].id;
      if (slots_[i].node == nullptr) return 0;
    }
  }
  // Gives the node the next id (size() after the call); false when it already has one.
  bool Insert(const Node* node) { return Visit(node).second; }
  // The node's id, given now (true) or before (false).
  std::pair<uint64_t, bool> Visit(const Node* node) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    for (size_t i = Home(node);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].node == node) return {slots_[i].id, false};
      if (slots_[i].node == nullptr) {
        slots_[i] = Slot{node, ++size_};
        return {size_, true};
      }
    }
  }

 private:
  struct Slot {
    const Node* node = nullptr;
    uint64_t id = 0;
  };
  size_t Home(const Node* node) const {
    const auto bits = reinterpret_cast<uintptr_t>(node) >> 4;
    return static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> 17) & (slots_.size() - 1);
  }
  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& slot : old) {
      if (slot.node == nullptr) continue;
      size_t i = Home(slot.node);
      while (slots_[i].node != nullptr) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = slot;
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// Depth-first post-order over operands from `roots`, numbering each node as it is first reached
// (in `visited`): `reach(value, id, first)` for every edge taken, roots included, and `done(node)`
// once a node's operands are done.
template <typename Reach, typename Done>
void DepthFirst(const std::vector<Value>& roots, NodeIds& visited, Reach&& reach, Done&& done) {
  auto take = [&](const Value& value) {
    const auto [id, first] = visited.Visit(value.node.get());
    reach(value, id, first);
    return first;
  };
  std::vector<std::pair<Node*, size_t>> stack;
  for (const Value& root : roots) {
    if (!take(root)) continue;
    stack.push_back({root.node.get(), 0});
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->operands.size()) {
        const Value& operand = node->operands[next++];
        if (take(operand)) stack.push_back({operand.node.get(), 0});
        continue;
      }
      Node* finished = node;
      stack.pop_back();
      done(finished);
    }
  }
}

// A region body's ops in topological order, stopping at the region's arguments.
void TopologicalOrder(const std::vector<Value>& roots, std::vector<Node*>& order) {
  NodeIds visited;
  DepthFirst(
      roots, visited, [](const Value&, uint64_t, bool) {},
      [&](Node* node) {
        if (node->kind == NodeKind::kOp) {
          order.push_back(node);
        } else if (node->kind != NodeKind::kRegionArgument) {
          throw std::logic_error("a region captured a parameter");
        }
      });
}

}  // namespace

// ---- Hashing ----

void Hasher::Add(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    Add(word);
  }
  uint64_t tail = size;
  for (; i < size; ++i) tail = (tail << 8) | bytes[i];
  Add(tail);
}

Signature Hasher::Finish() const { return Signature{Mix(a ^ (b >> 1)), Mix(b + a)}; }

std::string Signature::ToHex() const {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return buffer;
}

namespace {

void HashType(Hasher& h, const TensorType& type, bool with_shapes) {
  h.Add(static_cast<uint64_t>(type.dtype) | (static_cast<uint64_t>(type.shape.size()) << 8));
  if (!with_shapes) return;
  for (int64_t d : type.shape) h.Add(static_cast<uint64_t>(d));
}

// An operand as the (id, result index) of the node that makes it, which the walk has already
// numbered: an edge to anything else is a malformed program.
uint64_t EdgeOf(const NodeIds& ids, const Value& value) {
  const uint64_t id = ids.Find(value.node.get());
  if (id == 0) throw std::logic_error("a program's node reads a value outside the program");
  return id * 64 + static_cast<uint64_t>(value.index);
}

void HashNodes(Hasher& h, const std::vector<Node*>& nodes, NodeIds& ids, bool with_shapes);

// A node's own structure: op, attributes, callee, result types and regions, not its operands.
void HashLocal(Hasher& h, const Node& node, bool with_shapes) {
  h.Add(node.op->hash.high);
  h.Add(node.op->hash.low);
  if (with_shapes) h.Add(node.attributes);
  // An embedded function's text is part of the program.
  if (node.callee) {
    h.Add(node.callee->hash.high);
    h.Add(node.callee->hash.low);
  }
  h.Add(node.results.size());
  for (const TensorType& type : node.results) HashType(h, type, with_shapes);
  h.Add(node.regions.size());
  for (const Region& region : node.regions) {
    NodeIds ids;
    for (const auto& argument : region.arguments) {
      ids.Insert(argument.get());
      HashType(h, argument->results[0], with_shapes);
    }
    std::vector<Node*> body;
    TopologicalOrder(region.results, body);
    HashNodes(h, body, ids, with_shapes);
    for (const Value& result : region.results) h.Add(EdgeOf(ids, result));
  }
}

// Hashes nodes in order, each as its structure and its operands' edges; numbers each node.
void HashNodes(Hasher& h, const std::vector<Node*>& nodes, NodeIds& ids, bool with_shapes) {
  for (const Node* node : nodes) {
    if (with_shapes) {  // hashed once, when the node was recorded
      h.Add(node->structure.high);
      h.Add(node->structure.low);
    } else {
      HashLocal(h, *node, false);
    }
    h.Add(node->operands.size());
    for (const Value& operand : node->operands) h.Add(EdgeOf(ids, operand));
    ids.Insert(node);
  }
}

Signature StructureOf(const Node& node) {
  Hasher h;
  HashLocal(h, node, true);
  return h.Finish();
}

// BuildProgram's walk: depth-first over the results, each step hashed as it is taken. A
// node is numbered when first reached; every edge is hashed as the number of the node it reaches;
// a finished node as its structure (hashed once, when it was recorded) or, for a parameter, its
// kind and type. That sequence describes the graph whole, so the program's signature needs no
// second walk. `expected` sizes the table, so that it does not grow as the walk goes.
Signature WalkProgram(const std::vector<Value>& roots, size_t expected, std::vector<Node*>& order,
                      std::vector<Node*>& parameters) {
  NodeIds visited(expected);
  Hasher h;
  DepthFirst(
      roots, visited,
      [&](const Value& value, uint64_t id, bool) {
        h.Add(id * 64 + static_cast<uint64_t>(value.index));
      },
      [&](Node* node) {
        h.Add(static_cast<uint64_t>(node->kind));
        if (node->kind == NodeKind::kOp) {
          h.Add(node->structure.high);
          h.Add(node->structure.low);
          h.Add(node->operands.size());
          order.push_back(node);
        } else if (node->kind == NodeKind::kRegionArgument) {
          throw std::logic_error("a program reads a region's argument");
        } else {
          HashType(h, node->results[0], /*with_shapes=*/true);
          parameters.push_back(node);
        }
      });
  h.Add(roots.size());
  return h.Finish();
}

}  // namespace

Program BuildProgram(std::vector<Value> results) {
  Program program;
  program.results = std::move(results);
  std::vector<Node*> parameters;
  // A thread's cuts are mostly alike (one step after another): the last one's size is the guess.
  thread_local size_t last_size = 0;
  program.nodes.reserve(last_size);
  program.structure = WalkProgram(program.results, last_size, program.nodes, parameters);
  last_size = program.nodes.size() + parameters.size();
  for (Node* parameter : parameters) {
    if (parameter->kind == NodeKind::kBufferParameter) {
      program.parameters.push_back(parameter);
      continue;
    }
    const DType dtype = parameter->scalar.dtype;
    auto pack = std::find_if(program.scalar_packs.begin(), program.scalar_packs.end(),
                             [&](const ScalarPack& p) { return p.dtype == dtype; });
    if (pack == program.scalar_packs.end()) {
      program.scalar_packs.push_back(ScalarPack{dtype, {}});
      pack = program.scalar_packs.end() - 1;
    }
    pack->scalars.push_back(parameter);
  }
  program.aliased_result.assign(program.parameters.size(), -1);
  return program;
}

Signature ComputeSignature(const Program& program, uint64_t salt, bool with_shapes) {
  Hasher h;
  h.Add(salt);
  if (with_shapes) {  // BuildProgram hashed the structure; donation is decided after it
    h.Add(program.structure.high);
    h.Add(program.structure.low);
    for (int result : program.aliased_result) h.Add(static_cast<uint64_t>(result + 1));
    return h.Finish();
  }
  size_t scalars = 0;
  for (const ScalarPack& pack : program.scalar_packs) scalars += pack.scalars.size();
  NodeIds ids(program.parameters.size() + scalars + program.nodes.size());
  h.Add(program.parameters.size());
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const Node* parameter = program.parameters[i];
    h.Add(static_cast<uint64_t>(parameter->kind));
    HashType(h, parameter->results[0], with_shapes);
    h.Add(static_cast<uint64_t>(program.aliased_result[i] + 1));
    ids.Insert(parameter);
  }
  h.Add(program.scalar_packs.size());
  for (const ScalarPack& pack : program.scalar_packs) {
    h.Add(static_cast<uint64_t>(pack.dtype) | (static_cast<uint64_t>(pack.scalars.size()) << 8));
    for (const Node* scalar : pack.scalars) ids.Insert(scalar);
  }
  HashNodes(h, program.nodes, ids, with_shapes);
  h.Add(program.results.size());
  for (const Value& result : program.results) h.Add(EdgeOf(ids, result));
  return h.Finish();
}

// ---- Printer ----

namespace {

TensorType PackType(const ScalarPack& pack) {
  return TensorType{pack.dtype, {static_cast<int64_t>(pack.scalars.size())}};
}

class Printer {
 public:
  std::string Print(const Program& program, int num_replicas) {
    out_ << "module @torch_tpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = "
         << num_replicas << " : i32} {\n";
    out_ << "  func.func public @main(";
    for (size_t i = 0; i < program.parameters.size(); ++i) {
      const Node* parameter = program.parameters[i];
      names_[parameter] = "%arg" + std::to_string(i);
      out_ << (i ? ", " : "") << names_[parameter] << ": " << parameter->results[0].ToMlir();
      if (program.aliased_result[i] >= 0) {
        out_ << " {tf.aliasing_output = " << program.aliased_result[i] << " : i32}";
      }
    }
    for (size_t k = 0; k < program.scalar_packs.size(); ++k) {
      out_ << (program.parameters.empty() && k == 0 ? "" : ", ") << "%pack" << k << ": "
           << PackType(program.scalar_packs[k]).ToMlir();
    }
    out_ << ") -> (";
    for (size_t i = 0; i < program.results.size(); ++i) {
      out_ << (i ? ", " : "") << program.results[i].type().ToMlir();
    }
    out_ << ") {\n";
    for (size_t k = 0; k < program.scalar_packs.size(); ++k) {
      const ScalarPack& pack = program.scalar_packs[k];
      const std::string pack_type = PackType(pack).ToMlir();
      const std::string element = TensorType{pack.dtype, {1}}.ToMlir();
      for (size_t i = 0; i < pack.scalars.size(); ++i) {
        const std::string slice = "%pack" + std::to_string(k) + "_" + std::to_string(i);
        out_ << "    " << slice << " = \"stablehlo.slice\"(%pack" << k
             << ") {start_indices = array<i64: " << i << ">, limit_indices = array<i64: " << i + 1
             << ">, strides = array<i64: 1>} : (" << pack_type << ") -> " << element << "\n";
        names_[pack.scalars[i]] = slice + "_scalar";
        out_ << "    " << slice << "_scalar = \"stablehlo.reshape\"(" << slice << ") : (" << element
             << ") -> " << pack.scalars[i]->results[0].ToMlir() << "\n";
      }
    }
    PrintNodes(program.nodes, "    ");
    out_ << "    return ";
    PrintValueList(program.results);
    out_ << " : ";
    for (size_t i = 0; i < program.results.size(); ++i) {
      out_ << (i ? ", " : "") << program.results[i].type().ToMlir();
    }
    out_ << "\n  }\n";
    // Embedded functions, once each however many nodes call them.
    for (const Function* function : functions_) out_ << "  " << function->definitions << "\n";
    out_ << "}\n";
    return out_.str();
  }

 private:
  std::string Name(const Value& value) {
    const std::string& base = names_.at(value.node.get());
    if (value.node->results.size() == 1) return base;
    return base + "#" + std::to_string(value.index);
  }

  void PrintValueList(const std::vector<Value>& values) {
    for (size_t i = 0; i < values.size(); ++i) out_ << (i ? ", " : "") << Name(values[i]);
  }

  void PrintNodes(const std::vector<Node*>& nodes, const std::string& indent) {
    for (const Node* node : nodes) {
      std::string name = "%";  // appended, not "%" + ...: GCC 12 warns falsely (-Wrestrict)
      name += std::to_string(next_id_++);
      SetName(node, name);
      if (node->callee && printed_symbols_.insert(node->callee->symbol).second) {
        functions_.push_back(node->callee.get());
      }
      out_ << indent << name;
      if (node->results.size() > 1) out_ << ":" << node->results.size();
      out_ << " = \"" << node->op->text << "\"(";
      PrintValueList(node->operands);
      out_ << ")";
      if (!node->regions.empty()) {
        out_ << " (";
        for (size_t r = 0; r < node->regions.size(); ++r) {
          out_ << (r ? ", " : "") << "{\n";
          PrintRegion(node->regions[r], indent + "  ");
          out_ << indent << "}";
        }
        out_ << ")";
      }
      if (!node->attributes.empty()) out_ << " {" << node->attributes << "}";
      out_ << " : (";
      for (size_t i = 0; i < node->operands.size(); ++i) {
        out_ << (i ? ", " : "") << node->operands[i].type().ToMlir();
      }
      out_ << ") -> ";
      if (node->results.size() == 1) {
        out_ << node->results[0].ToMlir();
      } else {
        out_ << "(";
        for (size_t i = 0; i < node->results.size(); ++i) {
          out_ << (i ? ", " : "") << node->results[i].ToMlir();
        }
        out_ << ")";
      }
      out_ << "\n";
    }
  }

  // A name given inside a region is that region's: a node its body uses from outside (a shared
  // constant) is defined again inside, and keeps its outer name after the region.
  void SetName(const Node* node, const std::string& name) {
    if (region_depth_ > 0) {
      auto it = names_.find(node);
      outer_names_.push_back(
          {node, it == names_.end() ? std::nullopt : std::optional<std::string>(it->second)});
    }
    names_[node] = name;
  }

  void PrintRegion(const Region& region, const std::string& indent) {
    const size_t outer_mark = outer_names_.size();
    ++region_depth_;
    PrintRegionBody(region, indent);
    --region_depth_;
    while (outer_names_.size() > outer_mark) {
      auto& [node, name] = outer_names_.back();
      if (name) {
        names_[node] = std::move(*name);
      } else {
        names_.erase(node);
      }
      outer_names_.pop_back();
    }
  }

  void PrintRegionBody(const Region& region, const std::string& indent) {
    out_ << indent << "^bb0(";
    for (size_t i = 0; i < region.arguments.size(); ++i) {
      std::string name = "%b" + std::to_string(next_id_++);
      SetName(region.arguments[i].get(), name);
      out_ << (i ? ", " : "") << name << ": " << region.arguments[i]->results[0].ToMlir();
    }
    out_ << "):\n";
    std::vector<Node*> body;
    TopologicalOrder(region.results, body);
    PrintNodes(body, indent + "  ");
    out_ << indent << "  \"stablehlo.return\"(";
    PrintValueList(region.results);
    out_ << ") : (";
    for (size_t i = 0; i < region.results.size(); ++i) {
      out_ << (i ? ", " : "") << region.results[i].type().ToMlir();
    }
    out_ << ") -> ()\n";
  }

  std::ostringstream out_;
  std::unordered_map<const Node*, std::string> names_;
  int region_depth_ = 0;
  std::vector<std::pair<const Node*, std::optional<std::string>>> outer_names_;
  int next_id_ = 0;
  std::vector<const Function*> functions_;  // embedded functions, in order of first call
  std::unordered_set<std::string> printed_symbols_;
};

}  // namespace

std::string PrintProgram(const Program& program, int num_replicas) {
  return Printer().Print(program, num_replicas);
}

}  // namespace torch_tpu::ir
