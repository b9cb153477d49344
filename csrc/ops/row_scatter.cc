// Row scatters shared by index_reduce, segment_reduce and nonzero_static (row_scatter.h).
#include "ops/row_scatter.h"

#include <limits>
#include <numeric>

namespace torch_tpu::ops {

RowReduce RowReduceFor(const std::string& name) {
  if (name == "sum" || name == "mean") return RowReduce::kSum;
  if (name == "prod") return RowReduce::kProd;
  if (name == "amax" || name == "max") return RowReduce::kMax;
  if (name == "amin" || name == "min") return RowReduce::kMin;
  throw UnsupportedError("reduce '" + name + "'");
}

Value RowReduceIdentity(RowReduce reduce, DType dtype) {
  if (reduce == RowReduce::kProd) return ir::IntegerConstant(1, dtype);
  if (reduce != RowReduce::kMax && reduce != RowReduce::kMin) return ir::IntegerConstant(0, dtype);
  const bool lowest = reduce == RowReduce::kMax;
  if (ir::IsFloating(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    return ir::ScalarConstant(lowest ? -inf : inf, dtype);
  }
  if (dtype == DType::kBool) return ir::IntegerConstant(lowest ? 0 : 1, dtype);
  // -1 is the all-ones pattern: the largest unsigned value.
  if (ir::IsUnsignedInteger(dtype)) return ir::IntegerConstant(lowest ? 0 : -1, dtype);
  const int bits = static_cast<int>(ir::ByteSize(dtype) * 8);
  const int64_t max = static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
  return ir::IntegerConstant(lowest ? -max - 1 : max, dtype);
}

namespace {

// Combines the element held (a) with an update (b); a NaN on either side wins for max/min.
Value Combine(RowReduce reduce, const Value& a, const Value& b) {
  const TensorType scalar = a.type();
  switch (reduce) {
    case RowReduce::kReplace:
      return b;
    case RowReduce::kSum:
      return ir::MakeOp(a.dtype() == DType::kBool ? "stablehlo.or" : "stablehlo.add", {a, b},
                        scalar);
    case RowReduce::kProd:
      return ir::MakeOp(a.dtype() == DType::kBool ? "stablehlo.and" : "stablehlo.multiply", {a, b},
                        scalar);
    default:
      break;
  }
  const bool max = reduce == RowReduce::kMax;
  Value picked = ir::MakeOp(max ? "stablehlo.maximum" : "stablehlo.minimum", {a, b}, scalar);
  if (!ir::IsFloating(a.dtype())) return picked;
  return Select(IsNan(a), a, Select(IsNan(b), b, picked));
}

}  // namespace

Value ScatterRows(const Value& operand, const Value& rows, const Value& updates, RowReduce reduce) {
  const int64_t k = rows.shape().empty() ? 1 : rows.shape()[0];
  const TensorType scalar{operand.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{Combine(reduce, a[0], a[1])};
  });
  std::vector<int64_t> window(operand.rank() - 1);
  std::iota(window.begin(), window.end(), 1);
  std::string numbers = "scatter_dimension_numbers = #stablehlo.scatter<";
  if (!window.empty()) numbers += "update_window_dims = " + ir::I64List(window) + ", ";
  numbers +=
      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>";
  Shape update_shape = operand.shape();
  update_shape[0] = k;
  Value shaped = BroadcastTo(Convert(updates, operand.dtype()), update_shape);
  Value indices = Reshape(Convert(rows, DType::kS64), {k, 1});
  return ir::MakeMultiOp("stablehlo.scatter", {operand, indices, shaped}, {operand.type()}, numbers,
                         {std::move(body)})[0];
}

std::vector<int64_t> DimToFront(int64_t dim, int64_t rank) {
  std::vector<int64_t> perm{dim};
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) perm.push_back(d);
  }
  return perm;
}

std::vector<int64_t> FrontToDim(int64_t dim, int64_t rank) {
  const std::vector<int64_t> forward = DimToFront(dim, rank);
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[forward[i]] = i;
  return inverse;
}

Value GatherRows(const Value& operand, const Value& rows) {
  const int64_t k = rows.shape()[0];
  std::vector<int64_t> window(operand.rank() - 1);
  std::iota(window.begin(), window.end(), 1);
  Shape slice = operand.shape();
  slice[0] = 1;
  Shape result = operand.shape();
  result[0] = k;
  std::string numbers = "dimension_numbers = #stablehlo.gather<";
  if (!window.empty()) numbers += "offset_dims = " + ir::I64List(window) + ", ";
  numbers +=
      "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, "
      "slice_sizes = " +
      ir::I64Array(slice);
  Value indices = Reshape(Convert(rows, DType::kS64), {k, 1});
  return ir::MakeOp("stablehlo.gather", {operand, indices}, TensorType{operand.dtype(), result},
                    numbers);
}

}  // namespace torch_tpu::ops
