#include "ops/builder.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ops/target.h"

namespace torch_tpu::ops {

Value Convert(const Value& value, DType dtype) {
  if (value.dtype() == dtype) return value;
  // Complex to real keeps the real part, as PyTorch's casts do; real to complex has imag 0.
  if (ir::IsComplex(value.dtype()) && dtype != DType::kBool) return Convert(Real(value), dtype);
  if (ir::IsComplex(dtype)) {
    Value real = Convert(value, DType::kF32);
    return MakeComplex(real, ConstantLike(0, real));
  }
  if (dtype == DType::kBool) {
    // PyTorch's cast to bool is "!= 0", whereas a StableHLO convert would truncate.
    return Compare(value, ConstantLike(0, value), "NE");
  }
  // A StableHLO convert saturates out-of-range floats; PyTorch's casts do not. Float to uint8
  // goes through int64, as c10's static_cast_with_inter_type defines it (-3.7 -> 253); float to
  // int8/int16 through int32, which is what the CPU produces out of range (200.3 -> -56).
  if (ir::IsFloating(value.dtype())) {
    if (dtype == DType::kU8) return Convert(Convert(value, DType::kS64), dtype);
    if (dtype == DType::kS8 || dtype == DType::kS16) {
      return Convert(Convert(value, DType::kS32), dtype);
    }
  }
  return ir::MakeOp("stablehlo.convert", {value}, TensorType{dtype, value.shape()});
}

Value Reshape(const Value& value, const Shape& shape) {
  if (value.shape() == shape) return value;
  // A reshape of a reshape is one reshape of the original: both keep row-major order. Reading a
  // view of a value just written to its 1-D storage then takes no node at all.
  const ir::Node& node = *value.node;
  if (node.kind == ir::NodeKind::kOp && node.op->text == "stablehlo.reshape") {
    return Reshape(node.operands[0], shape);
  }
  return ir::MakeOp("stablehlo.reshape", {value}, TensorType{value.dtype(), shape});
}

namespace {

// The op behind `value` once ops that keep its layout in XLA's eyes are looked through: XLA lays
// out their results as their operands, so a layout it picks for one reaches the op behind.
const ir::Node* ThroughLayoutKeepingOps(const Value& value) {
  static const std::set<std::string_view> kLayoutKeeping{
      "stablehlo.convert", "stablehlo.reshape", "stablehlo.broadcast_in_dim", "stablehlo.slice",
      "stablehlo.dynamic_slice"};
  const ir::Node* node = value.node.get();
  while (node->kind == ir::NodeKind::kOp && kLayoutKeeping.count(node->op->text) > 0) {
    node = node->operands[0].node.get();
  }
  return node;
}

bool IsOp(const ir::Node* node, std::string_view op) {
  return node->kind == ir::NodeKind::kOp && node->op->text == op;
}

Value Barrier(const Value& value) {
  return ir::MakeMultiOp("stablehlo.optimization_barrier", {value}, {value.type()})[0];
}

// A bf16 x bf16 -> f32 product (DEFAULT precision) on a target that keeps such dots row-major.
bool WidenedBf16Product(const ir::Node* node) {
  return CurrentLoweringTarget().row_major_bf16_dots && IsOp(node, "stablehlo.dot_general") &&
         node->operands[0].dtype() == DType::kBF16 && node->results[0].dtype != DType::kBF16;
}

}  // namespace

Value Transpose(const Value& value, const std::vector<int64_t>& permutation) {
  bool identity = true;
  for (size_t i = 0; i < permutation.size(); ++i)
    identity &= permutation[i] == static_cast<int64_t>(i);
  if (identity) return value;
  Shape shape;
  for (int64_t p : permutation) shape.push_back(value.shape().at(p));
  // XLA would fold the transpose of a widened bf16 product ((x @ w).t(), a backward's transposed
  // product) into the dot's output layout, after it decided to keep the dot in bf16, leaving a
  // bf16 dot its runtime cannot run. The barrier keeps the product row-major; a barrier on every
  // product instead cost an MLP training step 15-25%.
  const Value operand = WidenedBf16Product(ThroughLayoutKeepingOps(value)) ? Barrier(value) : value;
  return ir::MakeOp("stablehlo.transpose", {operand}, TensorType{value.dtype(), shape},
                    "permutation = " + ir::I64Array(permutation));
}

Value BroadcastInDim(const Value& value, const Shape& shape, const std::vector<int64_t>& dims) {
  if (value.shape() == shape) return value;
  return ir::MakeOp("stablehlo.broadcast_in_dim", {value}, TensorType{value.dtype(), shape},
                    "broadcast_dimensions = " + ir::I64Array(dims));
}

Value BroadcastTo(const Value& value, const Shape& shape) {
  if (value.shape() == shape) return value;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t value_rank = value.rank();
  if (value_rank > rank) throw std::logic_error("BroadcastTo: rank too large");
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < value_rank; ++i) dims.push_back(rank - value_rank + i);
  // A size-1 dim broadcast to a larger size must be squeezed away first.
  Shape kept;
  std::vector<int64_t> kept_dims;
  for (int64_t i = 0; i < value_rank; ++i) {
    int64_t d = value.shape()[i];
    if (d == shape[dims[i]]) {
      kept.push_back(d);
      kept_dims.push_back(dims[i]);
    } else if (d != 1) {
      throw std::logic_error("BroadcastTo: incompatible shapes");
    }
  }
  return BroadcastInDim(Reshape(value, kept), shape, kept_dims);
}

Shape BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value Slice(const Value& value, const std::vector<int64_t>& start,
            const std::vector<int64_t>& limit, const std::vector<int64_t>& strides) {
  Shape shape;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    shape.push_back(n);
    identity &= start[i] == 0 && limit[i] == value.shape()[i] && strides[i] == 1;
  }
  if (identity) return value;
  return ir::MakeOp("stablehlo.slice", {value}, TensorType{value.dtype(), shape},
                    "start_indices = " + ir::I64Array(start) + ", limit_indices = " +
                        ir::I64Array(limit) + ", strides = " + ir::I64Array(strides));
}

Value SliceAxis(const Value& value, int64_t axis, int64_t start, int64_t limit, int64_t stride) {
  std::vector<int64_t> starts(value.rank(), 0), limits = value.shape(), strides(value.rank(), 1);
  starts[axis] = start;
  limits[axis] = limit;
  strides[axis] = stride;
  return Slice(value, starts, limits, strides);
}

Value Pad(const Value& value, const Value& padding_value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  Shape shape;
  for (int64_t i = 0; i < value.rank(); ++i) {
    int64_t d = value.shape()[i];
    shape.push_back(low[i] + high[i] + d + std::max<int64_t>(d - 1, 0) * interior[i]);
  }
  return ir::MakeOp("stablehlo.pad", {value, padding_value}, TensorType{value.dtype(), shape},
                    "edge_padding_low = " + ir::I64Array(low) + ", edge_padding_high = " +
                        ir::I64Array(high) + ", interior_padding = " + ir::I64Array(interior));
}

// Scatter-adds `updates` (flattened) into a zero 1-D value of `size` elements at `indices`.
Value ScatterAdd1D(const Value& updates, const Value& indices, int64_t size) {
  const int64_t n = ir::NumElements(updates.shape());
  TensorType scalar{updates.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{ir::MakeOp("stablehlo.add", {a[0], a[1]}, scalar)};
  });
  return ir::MakeMultiOp(
      "stablehlo.scatter",
      {Constant(0, updates.dtype(), {size}), Reshape(indices, {n, 1}), Reshape(updates, {n})},
      {TensorType{updates.dtype(), {size}}},
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
      "[0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>",
      {std::move(body)})[0];
}

std::vector<Value> InclusiveScan(std::vector<Value> values, int64_t dim,
                                 const std::vector<Value>& identity, const ScanCombine& combine) {
  const int64_t n = values.front().shape()[dim];
  const size_t rank = values.front().rank();
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  for (int64_t shift = 1; shift < n; shift *= 2) {
    low[dim] = shift;
    std::vector<Value> shifted;
    for (size_t i = 0; i < values.size(); ++i) {
      shifted.push_back(
          Pad(SliceAxis(values[i], dim, 0, n - shift), identity[i], low, high, interior));
    }
    values = combine(shifted, values);
  }
  return values;
}

Value Concatenate(const std::vector<Value>& values, int64_t axis) {
  if (values.size() == 1) return values[0];
  Shape shape = values.at(0).shape();
  shape[axis] = 0;
  for (const Value& v : values) shape[axis] += v.shape()[axis];
  return ir::MakeOp("stablehlo.concatenate", values, TensorType{values[0].dtype(), shape},
                    "dimension = " + std::to_string(axis) + " : i64");
}

Value I64Constant(const std::vector<int64_t>& values, const Shape& shape) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  const TensorType type{DType::kS64, {static_cast<int64_t>(values.size())}};
  return Reshape(ir::MakeOp("stablehlo.constant", {}, type,
                            "value = dense<[" + text + "]> : " + type.ToMlir()),
                 shape);
}

Value Iota(const TensorType& type, int64_t dimension) {
  return ir::MakeOp("stablehlo.iota", {}, type,
                    "iota_dimension = " + std::to_string(dimension) + " : i64");
}

Value Unary(std::string_view op, const Value& x) { return ir::MakeOp(op, {x}, x.type()); }

Value BinaryTyped(std::string_view op, const Value& a, const Value& b, DType result) {
  Shape shape = BroadcastShapes(a.shape(), b.shape());
  return ir::MakeOp(op, {BroadcastTo(a, shape), BroadcastTo(b, shape)}, TensorType{result, shape});
}

Value Binary(std::string_view op, const Value& a, const Value& b) {
  if (a.dtype() != b.dtype())
    throw std::logic_error("Binary " + std::string(op) + ": operand dtypes differ");
  return BinaryTyped(op, a, b, a.dtype());
}

Value Add(const Value& a, const Value& b) { return Binary("stablehlo.add", a, b); }
Value Sub(const Value& a, const Value& b) { return Binary("stablehlo.subtract", a, b); }
Value Mul(const Value& a, const Value& b) { return Binary("stablehlo.multiply", a, b); }
Value Div(const Value& a, const Value& b) { return Binary("stablehlo.divide", a, b); }
Value Neg(const Value& x) { return Unary("stablehlo.negate", x); }
Value Abs(const Value& x) {
  if (ir::IsComplex(x.dtype())) return ir::MakeOp("stablehlo.abs", {x}, ComplexPart(x));
  return ir::IsUnsignedInteger(x.dtype()) ? x : Unary("stablehlo.abs", x);
}
TensorType ComplexPart(const Value& z) { return TensorType{DType::kF32, z.shape()}; }
Value Real(const Value& z) {
  return ir::IsComplex(z.dtype()) ? ir::MakeOp("stablehlo.real", {z}, ComplexPart(z)) : z;
}
Value Imag(const Value& z) { return ir::MakeOp("stablehlo.imag", {z}, ComplexPart(z)); }
Value MakeComplex(const Value& real, const Value& imag) {
  Shape shape = BroadcastShapes(real.shape(), imag.shape());
  return ir::MakeOp("stablehlo.complex", {BroadcastTo(real, shape), BroadcastTo(imag, shape)},
                    TensorType{DType::kC64, shape});
}
Value Exp(const Value& x) { return Unary("stablehlo.exponential", x); }
Value Log(const Value& x) { return Unary("stablehlo.log", x); }
Value Sqrt(const Value& x) { return Unary("stablehlo.sqrt", x); }
Value Rsqrt(const Value& x) { return Unary("stablehlo.rsqrt", x); }
Value Tanh(const Value& x) { return Unary("stablehlo.tanh", x); }
Value Sigmoid(const Value& x) { return Unary("stablehlo.logistic", x); }
Value And(const Value& a, const Value& b) { return Binary("stablehlo.and", a, b); }
Value Or(const Value& a, const Value& b) { return Binary("stablehlo.or", a, b); }
Value Not(const Value& x) { return Unary("stablehlo.not", x); }
Value IsNan(const Value& x) { return Compare(x, x, "NE"); }

DType OpMathType(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16 ? DType::kF32 : dtype;
}

Value Max(const Value& a, const Value& b) { return Binary("stablehlo.maximum", a, b); }
Value Min(const Value& a, const Value& b) { return Binary("stablehlo.minimum", a, b); }

Value Compare(const Value& a, const Value& b, const std::string& direction) {
  if (a.dtype() != b.dtype()) throw std::logic_error("Compare: operand dtypes differ");
  const char* type = ir::IsFloating(a.dtype()) || ir::IsComplex(a.dtype()) ? "FLOAT"
                     : ir::IsSignedInteger(a.dtype())                      ? "SIGNED"
                                                                           : "UNSIGNED";
  Shape shape = BroadcastShapes(a.shape(), b.shape());
  return ir::MakeOp("stablehlo.compare", {BroadcastTo(a, shape), BroadcastTo(b, shape)},
                    TensorType{DType::kBool, shape},
                    "comparison_direction = #stablehlo<comparison_direction " + direction +
                        ">, compare_type = #stablehlo<comparison_type " + type + ">");
}

Value Select(const Value& predicate, const Value& on_true, const Value& on_false) {
  Shape shape =
      BroadcastShapes(predicate.shape(), BroadcastShapes(on_true.shape(), on_false.shape()));
  return ir::MakeOp(
      "stablehlo.select",
      {BroadcastTo(predicate, shape), BroadcastTo(on_true, shape), BroadcastTo(on_false, shape)},
      TensorType{on_true.dtype(), shape});
}

Value Constant(double value, DType dtype, const Shape& shape) {
  return ir::Full(value, TensorType{dtype, shape});
}

Value ConstantLike(double value, const Value& like) {
  return Constant(value, like.dtype(), like.shape());
}

Value SumOver(const Value& x, const std::vector<int64_t>& dims) {
  return Reduce(x, dims, "stablehlo.add", ir::ScalarConstant(0, x.dtype()));
}

Value Reduce(const Value& value, const std::vector<int64_t>& dims, std::string_view op,
             const Value& init) {
  if (dims.empty()) return value;
  Shape shape;
  for (int64_t i = 0; i < value.rank(); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) shape.push_back(value.shape()[i]);
  }
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  TensorType scalar{value.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{ir::MakeOp(op, {a[0], a[1]}, scalar)};
  });
  return ir::MakeMultiOp("stablehlo.reduce", {value, init}, {TensorType{value.dtype(), shape}},
                         "dimensions = " + ir::I64Array(sorted), {std::move(body)})[0];
}

Value KeepDims(const Value& reduced, const Shape& input_shape, const std::vector<int64_t>& dims) {
  Shape shape = input_shape;
  for (int64_t d : dims) shape[d] = 1;
  return Reshape(reduced, shape);
}

int64_t NormalizeDim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> NormalizeDims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(NormalizeDim(d, rank));
  if (rank == 0) out.clear();
  return out;
}

namespace {

LoweringTarget g_lowering_target;

// The dims of a dot operand that are neither batch nor contracting dims, in order.
std::vector<int64_t> FreeDims(int64_t rank, const std::vector<int64_t>& batch,
                              const std::vector<int64_t>& contract) {
  std::vector<int64_t> free;
  for (int64_t i = 0; i < rank; ++i) {
    if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
        std::find(contract.begin(), contract.end(), i) == contract.end()) {
      free.push_back(i);
    }
  }
  return free;
}

std::vector<int64_t> Joined(std::vector<int64_t> dims, const std::vector<int64_t>& more,
                            const std::vector<int64_t>& last) {
  dims.insert(dims.end(), more.begin(), more.end());
  dims.insert(dims.end(), last.begin(), last.end());
  return dims;
}

std::vector<int64_t> Range(size_t from, size_t count) {
  std::vector<int64_t> dims(count);
  std::iota(dims.begin(), dims.end(), static_cast<int64_t>(from));
  return dims;
}

// Whether `value` in dim order `order` is row-major, and stays so through XLA's simplifications:
// a transpose behind converts, reshapes, broadcasts or slices is not. XLA drops a unit batch dim
// that a broadcast added, or moves a slice, and then folds the transpose into the dot after it
// decided to keep the dot in bf16 (x.t().unsqueeze(0) @ y, an einsum's operand, a view at an
// offset), leaving a bf16 dot that its runtime cannot run.
bool RowMajor(const Value& value, const std::vector<int64_t>& order) {
  if (order != Range(0, order.size())) return false;
  return !IsOp(ThroughLayoutKeepingOps(value), "stablehlo.transpose");
}

int64_t ElementsAlong(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t elements = 1;
  for (int64_t d : dims) elements *= shape[d];
  return elements;
}

// A transpose node's permutation, read back from its attributes ("permutation = array<i64: ..>").
std::vector<int64_t> PermutationOf(const ir::Node& transpose) {
  std::vector<int64_t> permutation;
  const std::string& text = transpose.attributes;
  for (size_t at = text.find(':'); at != std::string::npos; at = text.find(',', at + 1)) {
    permutation.push_back(std::strtoll(text.c_str() + at + 1, nullptr, 10));  // no substring copy
  }
  return permutation;
}

// The transpose that `value` is (behind at most one convert), where `order` undoes it and its
// operand is row-major: `value` in `order` is then that operand, with no copy (w.t() asked for
// as w). Else null.
const ir::Node* TransposeUndoneBy(const Value& value, const std::vector<int64_t>& order) {
  const ir::Node* node = value.node.get();
  if (IsOp(node, "stablehlo.convert")) node = node->operands[0].node.get();
  if (!IsOp(node, "stablehlo.transpose")) return nullptr;
  const std::vector<int64_t> permutation = PermutationOf(*node);
  if (permutation.size() != order.size()) return nullptr;
  for (size_t j = 0; j < order.size(); ++j) {
    if (permutation[order[j]] != static_cast<int64_t>(j)) return nullptr;
  }
  const Value& source = node->operands[0];
  return RowMajor(source, Range(0, source.rank())) ? node : nullptr;
}

// The elements a row-major copy of `value` in `order` moves: none when it is row-major already.
int64_t CopyCost(const Value& value, const std::vector<int64_t>& order) {
  const bool free = RowMajor(value, order) || TransposeUndoneBy(value, order) != nullptr;
  return free ? 0 : ir::NumElements(value.shape());
}

// `value` with its dims in `order` and a unit dim at `unit_at`; unless it was row-major already,
// behind an optimization barrier. The reshape gives it a fresh row-major layout in XLA's eyes;
// the barrier keeps XLA from folding the transpose back into the dot, which would leave it a bf16
// dot its runtime cannot run.
Value RowMajorOperand(const Value& value, const std::vector<int64_t>& order, size_t unit_at) {
  const bool row_major = RowMajor(value, order);
  Shape shape;
  for (int64_t d : order) shape.push_back(value.shape()[d]);
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(unit_at), 1);
  if (const ir::Node* transpose = row_major ? nullptr : TransposeUndoneBy(value, order)) {
    return Reshape(Convert(transpose->operands[0], value.dtype()), shape);
  }
  const Value fresh = Reshape(row_major ? value : Transpose(value, order), shape);
  return row_major ? fresh : Barrier(fresh);
}

Value DotGeneralOp(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                   const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                   const std::vector<int64_t>& rhs_contract, const TensorType& type, bool highest) {
  std::string attributes =
      "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " + ir::I64List(lhs_batch) +
      ", rhs_batching_dimensions = " + ir::I64List(rhs_batch) +
      ", lhs_contracting_dimensions = " + ir::I64List(lhs_contract) +
      ", rhs_contracting_dimensions = " + ir::I64List(rhs_contract) + ">";
  if (highest) {
    attributes +=
        ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
  }
  return ir::MakeOp("stablehlo.dot_general", {lhs, rhs}, type, attributes);
}

}  // namespace

const LoweringTarget& CurrentLoweringTarget() { return g_lowering_target; }
void SetLoweringTarget(const LoweringTarget& target) { g_lowering_target = target; }

namespace {

// dot_general in the given operand order; on a target that runs bf16 products row-major only,
// with each operand that is not row-major copied so (target.h).
Value RowMajorDot(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                  const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                  const std::vector<int64_t>& rhs_contract, DType result, bool highest) {
  const std::vector<int64_t> lhs_free = FreeDims(lhs.rank(), lhs_batch, lhs_contract);
  const std::vector<int64_t> rhs_free = FreeDims(rhs.rank(), rhs_batch, rhs_contract);
  Shape shape;
  for (int64_t d : lhs_batch) shape.push_back(lhs.shape()[d]);
  for (int64_t d : lhs_free) shape.push_back(lhs.shape()[d]);
  for (int64_t d : rhs_free) shape.push_back(rhs.shape()[d]);
  const std::vector<int64_t> lhs_order = Joined(lhs_batch, lhs_free, lhs_contract);
  const std::vector<int64_t> rhs_order = Joined(rhs_batch, rhs_contract, rhs_free);
  if (lhs.dtype() == DType::kBF16 && g_lowering_target.row_major_bf16_dots &&
      !(RowMajor(lhs, lhs_order) && RowMajor(rhs, rhs_order))) {
    // [batch, 1, m.., k..] x [batch, k.., n.., 1]: row-major for XLA's CPU kernels (target.h).
    const size_t batch = lhs_batch.size(), contract = lhs_contract.size();
    const Value l = RowMajorOperand(lhs, lhs_order, batch);
    const Value r = RowMajorOperand(rhs, rhs_order, rhs.rank());
    Shape padded = shape;
    padded.insert(padded.begin() + static_cast<std::ptrdiff_t>(batch), 1);
    padded.push_back(1);
    const Value product =
        DotGeneralOp(l, r, Range(0, batch), Range(0, batch), Range(l.rank() - contract, contract),
                     Range(batch, contract), TensorType{result, padded}, highest);
    return Reshape(product, shape);
  }
  return DotGeneralOp(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                      TensorType{result, shape}, highest);
}

}  // namespace

Value DotGeneral(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                 const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                 const std::vector<int64_t>& rhs_contract, DType result, bool highest) {
  if (lhs.dtype() == DType::kBF16 && g_lowering_target.row_major_bf16_dots) {
    // rhs x lhs, transposed back, when its row-major copies and the transposed result move fewer
    // elements: x @ w.t() (every nn.Linear) then copies x and the result, not the larger weight
    // (bench_ops.py: a 64x512 -> 256 linear 1.7-1.9x faster on the CPU plugin).
    const std::vector<int64_t> lhs_free = FreeDims(lhs.rank(), lhs_batch, lhs_contract);
    const std::vector<int64_t> rhs_free = FreeDims(rhs.rank(), rhs_batch, rhs_contract);
    const int64_t direct = CopyCost(lhs, Joined(lhs_batch, lhs_free, lhs_contract)) +
                           CopyCost(rhs, Joined(rhs_batch, rhs_contract, rhs_free));
    const int64_t result_elements = ElementsAlong(lhs.shape(), lhs_batch) *
                                    ElementsAlong(lhs.shape(), lhs_free) *
                                    ElementsAlong(rhs.shape(), rhs_free);
    const int64_t swapped = CopyCost(rhs, Joined(rhs_batch, rhs_free, rhs_contract)) +
                            CopyCost(lhs, Joined(lhs_batch, lhs_contract, lhs_free)) +
                            result_elements;
    if (swapped < direct) {
      const Value product =
          RowMajorDot(rhs, lhs, rhs_batch, lhs_batch, rhs_contract, lhs_contract, result, highest);
      // [batch, n.., m..] back to [batch, m.., n..].
      const size_t batch = lhs_batch.size();
      return Transpose(product,
                       Joined(Range(0, batch), Range(batch + rhs_free.size(), lhs_free.size()),
                              Range(batch, rhs_free.size())));
    }
  }
  return RowMajorDot(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, result, highest);
}

}  // namespace torch_tpu::ops
