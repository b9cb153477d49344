// Graph IR: StableHLO ops with static shapes and dtypes, a builder, structural signatures and
// the StableHLO text printer. Knows nothing of torch or PJRT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace torch_tpu::ir {

enum class DType : uint8_t {
  kBool,
  kS8,
  kS16,
  kS32,
  kS64,
  kU8,
  kU16,
  kU32,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kC64  // complex<f32>
};

const char* MlirTypeName(DType dtype);
size_t ByteSize(DType dtype);
bool IsFloating(DType dtype);
bool IsComplex(DType dtype);
bool IsSignedInteger(DType dtype);
bool IsUnsignedInteger(DType dtype);
inline bool IsIntegral(DType dtype) { return IsSignedInteger(dtype) || IsUnsignedInteger(dtype); }

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& shape);

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const TensorType& other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  std::string ToMlir() const;  // "tensor<2x3xf32>"
};

struct Signature {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const Signature& other) const { return high == other.high && low == other.low; }
  std::string ToHex() const;
};

struct Node;
struct Function;  // ir/function.h

// One result of a node.
struct Value {
  std::shared_ptr<Node> node;
  int index = 0;
  explicit operator bool() const { return node != nullptr; }
  const TensorType& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  int64_t rank() const { return type().rank(); }
};

// A host value passed as a 0-d program parameter, so a new value does not recompile.
struct HostScalar {
  DType dtype = DType::kF32;
  uint8_t bytes[8] = {};
};

enum class NodeKind : uint8_t {
  kOp,               // a StableHLO op
  kBufferParameter,  // a device buffer bound at execution (opaque handle)
  kScalarParameter,  // a host scalar uploaded at execution
  kRegionArgument,   // an argument of the enclosing region's block
};

struct Region {
  std::vector<std::shared_ptr<Node>> arguments;  // kRegionArgument nodes, in order
  std::vector<Value> results;
};

// An op's name, interned: nodes share one copy of each name, hashed once (not per node).
struct OpName {
  std::string text;  // "stablehlo.add"
  Signature hash;
};
const OpName* InternOpName(std::string_view text);

struct Node {
  NodeKind kind = NodeKind::kOp;
  const OpName* op = nullptr;  // kOp
  std::string attributes;      // attribute dictionary body: "dimensions = array<i64: 1>"
  std::vector<Value> operands;
  std::vector<TensorType> results;
  std::vector<Region> regions;
  std::shared_ptr<const void> buffer;  // kBufferParameter: owned by the execution layer
  HostScalar scalar;                   // kScalarParameter
  int argument_index = 0;              // kRegionArgument
  // A "func.call" node: the embedded function it calls (a custom kernel's StableHLO).
  std::shared_ptr<const Function> callee;
  // What recorded the node (an op and the user's source line), named when a fused program fails.
  std::shared_ptr<const std::string> origin;
  // kOp: the node's own structure (op, attributes, callee, result types, regions), hashed once
  // when it is recorded, so that a cut's signature only adds the edges.
  Signature structure;
};

// Nodes recorded on this thread while a RecordingOrigin lives carry its origin.
class RecordingOrigin {
 public:
  explicit RecordingOrigin(std::shared_ptr<const std::string> origin);
  ~RecordingOrigin();
  RecordingOrigin(const RecordingOrigin&) = delete;
  RecordingOrigin& operator=(const RecordingOrigin&) = delete;

 private:
  std::shared_ptr<const std::string> saved_;
};

// ---- Builder: every function records one node and returns its result(s). ----

Value MakeOp(std::string_view op, std::vector<Value> operands, TensorType result,
             std::string attributes = "");
// `callee`: a "func.call" node's embedded function (ir/function.h MakeCall).
std::vector<Value> MakeMultiOp(std::string_view op, std::vector<Value> operands,
                               std::vector<TensorType> results, std::string attributes = "",
                               std::vector<Region> regions = {},
                               std::shared_ptr<const Function> callee = nullptr);
Value MakeBufferParameter(std::shared_ptr<const void> buffer, TensorType type);
Value MakeScalarParameter(const HostScalar& scalar);
// Builds a region whose block takes `argument_types`; `body` maps the block arguments to results.
template <typename Body>
Region MakeRegion(const std::vector<TensorType>& argument_types, Body&& body) {
  Region region;
  std::vector<Value> arguments;
  for (size_t i = 0; i < argument_types.size(); ++i) {
    auto node = std::make_shared<Node>();
    node->kind = NodeKind::kRegionArgument;
    node->results = {argument_types[i]};
    node->argument_index = static_cast<int>(i);
    region.arguments.push_back(node);
    arguments.push_back(Value{node, 0});
  }
  region.results = body(arguments);
  return region;
}

// Attribute text helpers.
std::string I64Array(const std::vector<int64_t>& values);  // "array<i64: 1, 2>"
std::string I64List(const std::vector<int64_t>& values);   // "[1, 2]"
std::string DenseI64(const std::vector<int64_t>& values);  // "dense<[1, 2]> : tensor<2xi64>"

// Constants: a splat of `value` (converted to dtype), exact for every dtype. The same constant is
// one node, shared by every graph recorded on the thread (nodes never change).
Value ScalarConstant(double value, DType dtype);
Value IntegerConstant(int64_t value, DType dtype);
Value HostScalarConstant(const HostScalar& scalar);
Value Full(double value, const TensorType& type);

// ---- Programs ----

// Host scalars of one dtype, passed to a program as one 1-D argument and sliced apart inside it:
// one upload per dtype for each execution, not one per scalar (an optimizer step has dozens).
struct ScalarPack {
  DType dtype = DType::kF32;
  std::vector<Node*> scalars;  // kScalarParameter nodes, in argument order
};

// The nodes needed for `results`, in topological order, with their parameters.
struct Program {
  std::vector<Node*> parameters;         // buffer parameters, the first arguments
  std::vector<ScalarPack> scalar_packs;  // then one argument per scalar dtype
  std::vector<Node*> nodes;              // ops in topological order
  std::vector<Value> results;
  std::vector<int> aliased_result;  // per buffer parameter: the result it is donated to, or -1
  // Ops, attributes, types and edges, hashed by BuildProgram's walk; never the parameters' values.
  Signature structure;
};

Program BuildProgram(std::vector<Value> results);

struct SignatureHash {
  size_t operator()(const Signature& s) const { return static_cast<size_t>(s.low ^ (s.high * 31)); }
};

// Structural: ops, attributes, shapes, dtypes, edges and aliasing; never the parameters' values.
// Without shapes (ranks kept, attributes dropped): what stays the same when only sizes change.
Signature ComputeSignature(const Program& program, uint64_t salt, bool with_shapes = true);

// `num_replicas`: how many replicas run the program at once (collectives inside the program).
std::string PrintProgram(const Program& program, int num_replicas = 1);

// A 128-bit hash of bytes, for signatures, plugin identities and cache checksums.
struct Hasher {
  uint64_t a = 0x9E3779B97F4A7C15ull;
  uint64_t b = 0xC2B2AE3D27D4EB4Full;
  void Add(const void* data, size_t size);
  // Inline: every cut hashes each of its nodes' words.
  void Add(uint64_t value) {
    a = Mix(a ^ value) + 0x632BE59BD9B4E019ull;
    b = Mix(b + value * 0x9E3779B97F4A7C15ull) ^ a;
  }
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
  }
  void Add(const std::string& text) {
    Add(static_cast<uint64_t>(text.size()));
    Add(text.data(), text.size());
  }
  Signature Finish() const;
};

}  // namespace torch_tpu::ir
