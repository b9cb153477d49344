// index_reduce(self, dim, index, source, reduce, include_self): slice i of `source` along `dim`
// is combined (prod, mean, amax, amin) into slice index[i] of self. Without include_self the
// touched slices start from the reduction's identity; mean divides by the number of values
// combined (floored for integers), leaving untouched slices as they were. Work is in the op-math
// type (f32 for f16/bf16). Out-of-range indices are dropped, not raised: checking them would need
// a host read. Its backward (index_reduce_backward) is composite in PyTorch.
#include <vector>

#include "ops/builder.h"
#include "ops/row_scatter.h"

namespace torch_tpu::ops {
namespace {

// a / b rounded toward negative infinity, for integers with b > 0.
Value FloorDivide(const Value& a, const Value& b) {
  Value quotient = Div(a, b);
  Value inexact = Compare(Mul(quotient, b), a, "NE");
  Value negative = Compare(a, ConstantLike(0, a), "LT");
  return Select(And(inexact, negative), Sub(quotient, ConstantLike(1, quotient)), quotient);
}

// Divides the combined rows by how many values each took; rows that took none stay.
Value MeanOfRows(const Value& sums, const Value& rows, bool include_self) {
  const DType dtype = sums.dtype();
  const int64_t n = sums.shape()[0];
  const int64_t k = rows.shape()[0];
  Value counts = ScatterRows(Constant(include_self ? 1 : 0, dtype, {n}), rows,
                             Constant(1, dtype, {k}), RowReduce::kSum);
  counts = Select(Compare(counts, ConstantLike(0, counts), "EQ"), ConstantLike(1, counts), counts);
  counts = BroadcastInDim(counts, sums.shape(), {0});
  return ir::IsFloating(dtype) ? Div(sums, counts) : FloorDivide(sums, counts);
}

std::vector<Value> IndexReduceLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  Value self = ctx.tensor(0);
  if (self.rank() == 0) self = Reshape(self, {1});
  const int64_t rank = self.rank();
  const int64_t dim = NormalizeDim(ctx.int_arg(1), rank);
  const std::string& name = ctx.string_arg(4);
  const bool include_self = ctx.bool_arg(5, true);
  const RowReduce reduce = RowReduceFor(name);
  const DType math = OpMathType(self.dtype());
  if (name == "mean" && self.dtype() == DType::kBool)
    throw UnsupportedError("reduce 'mean' for bool");
  Value index = Convert(ctx.tensor(2), DType::kS64);
  const int64_t k = ir::NumElements(index.shape());
  index = Reshape(index, {k});
  Shape source_shape = self.shape();
  source_shape[dim] = k;
  // Rows along dim 0: scatter whole slices.
  const std::vector<int64_t> to_front = DimToFront(dim, rank);
  Value base = Transpose(Convert(self, math), to_front);
  Value source = Transpose(Convert(Reshape(ctx.tensor(3), source_shape), math), to_front);
  if (!include_self) {
    Value identity = BroadcastTo(RowReduceIdentity(reduce, math), source.shape());
    base = ScatterRows(base, index, identity, RowReduce::kReplace);
  }
  Value result = ScatterRows(base, index, source, reduce);
  if (name == "mean") result = MeanOfRows(result, index, include_self);
  result = Transpose(result, FrontToDim(dim, rank));
  return {Reshape(Convert(result, out.dtype), out.shape)};
}

LoweringRegistrar registrar({
    {"index_reduce", IndexReduceLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
