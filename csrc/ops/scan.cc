// Lowerings for searches in sorted sequences (searchsorted, bucketize), trace and linalg_cross.
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// ---- searchsorted / bucketize ----

// The insertion index of each value in `boundaries` (searched along its last dim; a 1-D sequence
// serves every value): the count of boundaries that precede it. For a sorted sequence this is
// the CPU's binary search, and it does not depend on the order of the boundaries, so a sorter
// (a permutation that sorts them) changes nothing. The comparisons are negated as in the CPU's
// search, so a NaN value lands after every boundary.
Value InsertionIndex(const Value& boundaries, const Value& values, bool right, DType result) {
  const int64_t rank = values.rank();
  const int64_t length = boundaries.shape().back();
  Shape pairs = values.shape();
  pairs.push_back(length);
  std::vector<int64_t> value_dims(rank), boundary_dims;
  for (int64_t i = 0; i < rank; ++i) value_dims[i] = i;
  if (boundaries.rank() == 1) {
    boundary_dims = {rank};
  } else {
    for (int64_t i = 0; i < rank - 1; ++i) boundary_dims.push_back(i);
    boundary_dims.push_back(rank);
  }
  Value b = BroadcastInDim(boundaries, pairs, boundary_dims);
  Value v = BroadcastInDim(values, pairs, value_dims);
  Value not_after = Compare(b, v, right ? "GT" : "GE");
  Value precedes = Select(not_after, Constant(0, result, pairs), Constant(1, result, pairs));
  return Reduce(precedes, {rank}, "stablehlo.add", Constant(0, result));
}

// side= ("left"/"right") overrides right= when given; the meta function rejects a conflict but
// not an unknown side, nor a sorter of the wrong dtype, which the CPU kernel checks.
bool SearchesRight(const LoweringContext& ctx, size_t right, size_t side, size_t sorter) {
  if (ctx.has(sorter) && ctx.tensor(sorter).dtype() != DType::kS64) {
    throw std::runtime_error(
        std::string("torch.searchsorted(): sorter must be a tensor of long dtype but got dtype ") +
        ScalarTypeName(ctx.tensor(sorter).dtype()));
  }
  if (!ctx.has(side)) return ctx.bool_arg(right);
  const std::string& name = ctx.string_arg(side);
  if (name != "left" && name != "right") {
    throw std::runtime_error("torch.searchsorted(): side can only be 'left' or 'right' but got " +
                             name);
  }
  return name == "right";
}

// Both operands in the dtype they compare in.
DType ComparisonType(const LoweringContext& ctx, const Value& boundaries) {
  const DType t = ctx.promoted;
  if (t == DType::kBool) throw UnsupportedError(ctx.name + " of bool tensors");
  return ir::IsFloating(boundaries.dtype()) && !ir::IsFloating(t) ? boundaries.dtype() : t;
}

// searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter); self may be a scalar.
std::vector<Value> SearchsortedLowering(LoweringContext& ctx) {
  Value boundaries = ctx.tensor(0);
  const DType t = ComparisonType(ctx, boundaries);
  Value values = ctx.value(1, t);
  const bool right = SearchesRight(ctx, 3, 4, 5);
  return {InsertionIndex(Convert(boundaries, t), values, right, ctx.output().dtype)};
}

// bucketize(self, boundaries, *, out_int32, right); self may be a scalar.
std::vector<Value> BucketizeLowering(LoweringContext& ctx) {
  Value boundaries = ctx.tensor(1);
  // The meta function leaves this check to the CPU kernel.
  if (boundaries.rank() != 1) {
    throw std::runtime_error("boundaries tensor must be 1 dimension, but got dim(" +
                             std::to_string(boundaries.rank()) + ")");
  }
  const DType t = ComparisonType(ctx, boundaries);
  Value values = ctx.value(0, t);
  return {InsertionIndex(Convert(boundaries, t), values, ctx.bool_arg(3), ctx.output().dtype)};
}

// ---- trace ----

// trace(self) of a matrix: the sum of its diagonal, accumulated like sum (integers in int64,
// half precision in f32).
std::vector<Value> TraceLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  // The CPU has no bool kernel (its NotImplementedError); the meta function accepts bool.
  if (x.dtype() == DType::kBool) throw UnsupportedError("\"trace\" not implemented for 'Bool'");
  const DType out = ctx.output().dtype;
  const DType t = OpMathType(out);
  const TensorType index{DType::kS64, x.shape()};
  Value diagonal = Compare(Iota(index, 0), Iota(index, 1), "EQ");
  Value terms = Select(diagonal, Convert(x, t), Constant(0, t, x.shape()));
  return {Convert(Reduce(terms, {0, 1}, "stablehlo.add", Constant(0, t)), out)};
}

// ---- linalg_cross ----

// linalg_cross(self, other, dim): the cross product of the length-3 vectors along dim, after
// broadcasting, in the inputs' (promoted) dtype as on the CPU.
std::vector<Value> LinalgCrossLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const int64_t dim = NormalizeDim(ctx.int_arg(2, -1), out.rank());
  Value a = BroadcastTo(ctx.value(0, out.dtype), out.shape);
  Value b = BroadcastTo(ctx.value(1, out.dtype), out.shape);
  auto component = [&](const Value& v, int64_t i) { return SliceAxis(v, dim, i, i + 1); };
  std::vector<Value> parts;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    parts.push_back(
        Sub(Mul(component(a, j), component(b, k)), Mul(component(a, k), component(b, j))));
  }
  return {Concatenate(parts, dim)};
}

LoweringRegistrar registrar({
    {"searchsorted", SearchsortedLowering},
    {"bucketize", BucketizeLowering},
    {"trace", TraceLowering},
    {"linalg_cross", LinalgCrossLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
