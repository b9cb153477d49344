// Lowerings for sorting and order statistics: sort (argsort and msort decompose to it), topk,
// kthvalue, median and nanmedian. All are one stable stablehlo.sort of (values, iota indices)
// whose comparator orders NaN as the largest value, as the CPU does.
#include <limits>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// "a goes before b": a < b ascending, a > b descending, with NaN above every number. Equal
// elements (and NaNs) compare false both ways, so the stable sort keeps their input order.
Value Before(const Value& a, const Value& b, bool descending) {
  Value ordered = Compare(a, b, descending ? "GT" : "LT");
  if (!ir::IsFloating(a.dtype())) return ordered;
  const Value& nan_side = descending ? a : b;
  const Value& number_side = descending ? b : a;
  Value nan_first = Binary("stablehlo.and", IsNan(nan_side), Not(IsNan(number_side)));
  return Binary("stablehlo.or", ordered, nan_first);
}

}  // namespace

// Stable, so that ties keep their input order and the indices match the CPU's stable sorts (and
// its default sort wherever that is stable, which is not always: bf16 rows of thousands).
Sorted SortAlong(const Value& x, int64_t dim, bool descending) {
  Value indices = Iota(TensorType{DType::kS64, x.shape()}, dim);
  if (x.shape()[dim] <= 1) return {x, indices};
  TensorType value_scalar{x.dtype(), {}};
  TensorType index_scalar{DType::kS64, {}};
  auto comparator = ir::MakeRegion({value_scalar, value_scalar, index_scalar, index_scalar},
                                   [&](const std::vector<Value>& a) {
                                     return std::vector<Value>{Before(a[0], a[1], descending)};
                                   });
  auto results = ir::MakeMultiOp("stablehlo.sort", {x, indices}, {x.type(), indices.type()},
                                 "dimension = " + std::to_string(dim) + " : i64, is_stable = true",
                                 {std::move(comparator)});
  return {results[0], results[1]};
}

namespace {

// A 0-d input sorts as one element along dim 0 (PyTorch accepts dim 0 or -1).
Value AtLeast1d(const Value& x) { return x.rank() == 0 ? Reshape(x, {1}) : x; }

// sort(self, dim, descending) and sort.stable(self, *, stable, dim, descending).
std::vector<Value> SortLowering(LoweringContext& ctx) {
  const bool has_stable = ctx.overload.find("stable") != std::string::npos;
  const size_t dim_index = has_stable ? 2 : 1;
  Value self = AtLeast1d(ctx.tensor(0));
  const int64_t dim = NormalizeDim(ctx.int_arg(dim_index, -1), self.rank());
  Sorted sorted = SortAlong(self, dim, ctx.bool_arg(dim_index + 1));
  return {Reshape(sorted.values, ctx.output(0).shape),
          Reshape(sorted.indices, ctx.output(1).shape)};
}

// topk(self, k, dim, largest, sorted): the first k of a full sort. `sorted=False` leaves the
// order unspecified, so the sorted order serves it too.
std::vector<Value> TopkLowering(LoweringContext& ctx) {
  Value self = AtLeast1d(ctx.tensor(0));
  const int64_t k = ctx.int_arg(1);
  const int64_t dim = NormalizeDim(ctx.int_arg(2, -1), self.rank());
  Sorted sorted = SortAlong(self, dim, ctx.bool_arg(3, true));
  return {Reshape(SliceAxis(sorted.values, dim, 0, k), ctx.output(0).shape),
          Reshape(SliceAxis(sorted.indices, dim, 0, k), ctx.output(1).shape)};
}

// kthvalue(self, k, dim, keepdim): the k-th smallest (NaN largest).
std::vector<Value> KthvalueLowering(LoweringContext& ctx) {
  Value self = AtLeast1d(ctx.tensor(0));
  const int64_t k = ctx.int_arg(1);
  const int64_t dim = NormalizeDim(ctx.int_arg(2, -1), self.rank());
  Sorted sorted = SortAlong(self, dim, false);
  return {Reshape(SliceAxis(sorted.values, dim, k - 1, k), ctx.output(0).shape),
          Reshape(SliceAxis(sorted.indices, dim, k - 1, k), ctx.output(1).shape)};
}

// The element at `position` (s64, size 1 along dim) of each row of `values` along dim, by a
// one-hot mask (positions differ per row): the other elements become the lowest value.
Value TakePosition(const Value& values, const Value& position, int64_t dim) {
  Value mask = Compare(Iota(TensorType{DType::kS64, values.shape()}, dim),
                       BroadcastTo(position, values.shape()), "EQ");
  Value lowest = ir::IsFloating(values.dtype())
                     ? ir::ScalarConstant(-std::numeric_limits<double>::infinity(), values.dtype())
                     : ir::IntegerConstant(std::numeric_limits<int64_t>::min(), values.dtype());
  return KeepDims(Reduce(Select(mask, values, BroadcastTo(lowest, values.shape())), {dim},
                         "stablehlo.maximum", lowest),
                  values.shape(), {dim});
}

// median(self, dim, keepdim) / median(self), and the nanmedian forms. The lower median of each
// row; median returns NaN (and the first NaN's index) for a row with a NaN, nanmedian the median
// of the row's numbers (NaN for a row of NaNs).
template <bool kIgnoreNan>
std::vector<Value> MedianLowering(LoweringContext& ctx) {
  const bool whole = ctx.outputs.size() == 1;
  Value self = ctx.tensor(0);
  if (whole) self = Reshape(self, {ir::NumElements(self.shape())});
  self = AtLeast1d(self);
  const int64_t dim = whole ? 0 : NormalizeDim(ctx.int_arg(1), self.rank());
  const int64_t size = self.shape()[dim];
  Sorted sorted = SortAlong(self, dim, false);
  const int64_t middle = (size - 1) / 2;
  Value values = SliceAxis(sorted.values, dim, middle, middle + 1);
  Value indices = SliceAxis(sorted.indices, dim, middle, middle + 1);
  if (ir::IsFloating(self.dtype())) {
    // NaNs sort last, in input order: the row's NaN count fixes where the answer sits.
    Value nan_count = KeepDims(Reduce(Convert(IsNan(self), DType::kS64), {dim}, "stablehlo.add",
                                      ir::IntegerConstant(0, DType::kS64)),
                               self.shape(), {dim});
    Value size_value = ConstantLike(static_cast<double>(size), nan_count);
    Value position;
    if (kIgnoreNan) {
      Value numbers = Max(Sub(size_value, nan_count), ConstantLike(1, nan_count));
      position = Div(Sub(numbers, ConstantLike(1, nan_count)), ConstantLike(2, nan_count));
      values = TakePosition(sorted.values, position, dim);
      Value all_nan = Compare(nan_count, size_value, "EQ");
      values =
          Select(all_nan, ConstantLike(std::numeric_limits<double>::quiet_NaN(), values), values);
    } else {
      Value has_nan = Compare(nan_count, ConstantLike(0, nan_count), "GT");
      position = Select(has_nan, Sub(size_value, nan_count), ConstantLike(middle, nan_count));
      values =
          Select(has_nan, ConstantLike(std::numeric_limits<double>::quiet_NaN(), values), values);
    }
    indices = TakePosition(sorted.indices, position, dim);
  }
  std::vector<Value> results{Reshape(values, ctx.output(0).shape)};
  if (!whole) results.push_back(Reshape(indices, ctx.output(1).shape));
  return results;
}

const LoweringRegistrar registrar{
    {"sort", SortLowering},
    {"topk", TopkLowering},
    {"kthvalue", KthvalueLowering},
    {"median", MedianLowering<false>},
    {"nanmedian", MedianLowering<true>},
};

}  // namespace
}  // namespace torch_tpu::ops
