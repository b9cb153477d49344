// Helpers shared by the matrix decompositions; see matrix.h.
#include "ops/matrix.h"

#include <string>

namespace torch_tpu::ops {

Shape BatchOf(const Shape& shape) { return Shape(shape.begin(), shape.end() - 2); }

Shape WithMatrix(Shape batch, int64_t rows, int64_t columns) {
  batch.push_back(rows);
  batch.push_back(columns);
  return batch;
}

Shape WithLast(Shape shape, int64_t size) {
  shape.push_back(size);
  return shape;
}

int64_t Rows(const Value& x) { return x.shape()[x.rank() - 2]; }
int64_t Columns(const Value& x) { return x.shape().back(); }

Value S32(int64_t value) { return ir::IntegerConstant(value, DType::kS32); }

Value RowIndex(const Shape& shape) {
  return Iota(TensorType{DType::kS32, shape}, static_cast<int64_t>(shape.size()) - 2);
}

Value ColumnIndex(const Shape& shape) {
  return Iota(TensorType{DType::kS32, shape}, static_cast<int64_t>(shape.size()) - 1);
}

Value TriangleMask(const Shape& shape, bool lower, int64_t offset) {
  Value diagonal_distance = Sub(ColumnIndex(shape), RowIndex(shape));
  return Compare(diagonal_distance, S32(offset), lower ? "LE" : "GE");
}

Value DiagonalMask(const Shape& shape) {
  return Compare(RowIndex(shape), ColumnIndex(shape), "EQ");
}

Value Triangle(const Value& x, bool lower, int64_t offset) {
  return Select(TriangleMask(x.shape(), lower, offset), x, ConstantLike(0, x));
}

Value Identity(DType dtype, const Shape& shape) {
  return Select(DiagonalMask(shape), Constant(1, dtype, shape), Constant(0, dtype, shape));
}

Value MatrixTranspose(const Value& x) {
  std::vector<int64_t> permutation;
  for (int64_t i = 0; i < x.rank(); ++i) permutation.push_back(i);
  std::swap(permutation[x.rank() - 2], permutation[x.rank() - 1]);
  return Transpose(x, permutation);
}

Value Conjugate(const Value& x) {
  return ir::IsComplex(x.dtype()) ? MakeComplex(Real(x), Neg(Imag(x))) : x;
}

Value Adjoint(const Value& x) { return Conjugate(MatrixTranspose(x)); }

Value PerMatrix(const Value& x) { return Reshape(x, WithMatrix(x.shape(), 1, 1)); }

Value AnyOf(const Value& flags) {
  if (flags.rank() == 0) return flags;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < flags.rank(); ++d) dims.push_back(d);
  return Reduce(flags, dims, "stablehlo.or", ir::IntegerConstant(0, DType::kBool));
}

Value DynamicSliceAt(const Value& x, int64_t dim, const Value& start, int64_t size) {
  std::vector<Value> operands{x};
  Shape sizes = x.shape();
  sizes[dim] = size;
  for (int64_t d = 0; d < x.rank(); ++d) operands.push_back(d == dim ? start : S32(0));
  return ir::MakeOp("stablehlo.dynamic_slice", operands, TensorType{x.dtype(), sizes},
                    "slice_sizes = " + ir::I64Array(sizes));
}

Value DynamicUpdateSliceAt(const Value& x, const Value& update, int64_t dim, const Value& start) {
  std::vector<Value> operands{x, update};
  for (int64_t d = 0; d < x.rank(); ++d) operands.push_back(d == dim ? start : S32(0));
  return ir::MakeOp("stablehlo.dynamic_update_slice", operands, x.type());
}

Value TriangularSolve(Value a, Value b, bool left, bool lower, bool unit_diagonal, bool transpose_a,
                      bool conjugate_a) {
  const Shape batch = BroadcastShapes(BatchOf(a.shape()), BatchOf(b.shape()));
  a = BroadcastTo(a, WithMatrix(batch, Rows(a), Columns(a)));
  b = BroadcastTo(b, WithMatrix(batch, Rows(b), Columns(b)));
  if (ir::NumElements(b.shape()) == 0) return b;
  a = Triangle(a, lower);
  auto flag = [](bool value) { return value ? std::string("true") : std::string("false"); };
  return ir::MakeOp("stablehlo.triangular_solve", {a, b}, b.type(),
                    "left_side = " + flag(left) + ", lower = " + flag(lower) +
                        ", unit_diagonal = " + flag(unit_diagonal) +
                        ", transpose_a = #stablehlo<transpose " +
                        (!transpose_a                              ? "NO_TRANSPOSE"
                         : conjugate_a && ir::IsComplex(a.dtype()) ? "ADJOINT"
                                                                   : "TRANSPOSE") +
                        ">");
}

}  // namespace torch_tpu::ops
