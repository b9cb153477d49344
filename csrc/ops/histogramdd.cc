// histogram (bin_ct and bins_tensor) and histogramdd's _histogramdd_from_bin_cts and
// _histogramdd_from_bin_tensors: counts (or summed weights) of points [M, N] in the bins of a
// grid. A point lands in the bin whose left edge is the last one <= it (the rightmost bin also
// holds its right edge); points outside the edges, and NaN, are not counted: the CPU's binary
// search. Equal-width edges are the CPU's linspace between the
// range (the data's min and max when none is given, widened by 0.5 each way when they are equal).
// The CPU rejects data whose min/max are not finite: a device-side check raises that at the next
// synchronization (aten/device_checks.h). Counts accumulate in f64 for f64 input, f32
// otherwise (the CPU adds in the input's dtype).
#include <algorithm>
#include <limits>
#include <vector>

#include "ops/builder.h"
#include "ops/row_scatter.h"

namespace torch_tpu::ops {
namespace {

// linspace(low, high, steps) as the CPU computes it: from the start for the first half, from
// the end for the second. low/high are 0-d.
Value Linspace(const Value& low, const Value& high, int64_t steps) {
  const DType t = low.dtype();
  const Shape shape{steps};
  Value index = Convert(Iota({DType::kS64, shape}, 0), t);
  Value step = Div(Sub(high, low), Constant(static_cast<double>(steps - 1), t));
  Value from_low = Add(BroadcastTo(low, shape), Mul(BroadcastTo(step, shape), index));
  Value back = Sub(Constant(static_cast<double>(steps - 1), t, shape), index);
  Value from_high = Sub(BroadcastTo(high, shape), Mul(BroadcastTo(step, shape), back));
  Value first_half = Compare(index, Constant(static_cast<double>(steps / 2), t, shape), "LT");
  return Select(first_half, from_low, from_high);
}

// The edges of `bins` equal-width bins over column x ([M]): over `range` (low, high) when one is
// given, else over the data's range.
Value EqualWidthEdges(const Value& x, int64_t bins, const std::vector<double>& range = {}) {
  const DType t = x.dtype();
  Value low = ir::ScalarConstant(0, t), high = ir::ScalarConstant(1, t);
  if (!range.empty()) {
    low = ir::ScalarConstant(range[0], t);
    high = ir::ScalarConstant(range[1], t);
  } else if (x.shape()[0] > 0) {
    const double inf = std::numeric_limits<double>::infinity();
    low = Reduce(x, {0}, "stablehlo.minimum", ir::ScalarConstant(inf, t));
    high = Reduce(x, {0}, "stablehlo.maximum", ir::ScalarConstant(-inf, t));
  }
  if (!range.empty() || x.shape()[0] > 0) {
    Value point = Compare(low, high, "EQ");
    Value half = ir::ScalarConstant(0.5, t);
    low = Select(point, Sub(low, half), low);
    high = Select(point, Add(high, half), high);
  }
  return Linspace(low, high, bins + 1);
}

// How many of the sorted edges [E] are <= each x ([M]): a binary search (upper_bound) in
// log2(E) steps, each a gather of one probe per point.
Value EdgesAtOrBelow(const Value& edges, const Value& x) {
  const int64_t e = edges.shape()[0], m = x.shape()[0];
  const Value column = Reshape(edges, {e, 1});
  Value found = Constant(0, DType::kS64, {m});
  int64_t step = 1;
  while (step * 2 <= e) step *= 2;
  for (; step > 0; step /= 2) {
    // Take `step` more edges when there are that many and the last of them is <= x.
    Value candidate = Add(found, Constant(static_cast<double>(step), DType::kS64, {m}));
    Value fits = Compare(candidate, Constant(static_cast<double>(e), DType::kS64, {m}), "LE");
    Value probe =
        Select(fits, Sub(candidate, Constant(1, DType::kS64, {m})), Constant(0, DType::kS64, {m}));
    Value edge = Reshape(GatherRows(column, probe), {m});
    found = Select(And(fits, Compare(edge, x, "LE")), candidate, found);
  }
  return found;
}

// The histogram of points [M, N] over per-dim edges, with optional weights [M].
Value Histogram(const Value& points, const std::vector<Value>& edges, const Value& weight,
                bool density) {
  const int64_t m = points.shape()[0];
  const DType t = points.dtype();
  const DType acc = t == DType::kF64 ? DType::kF64 : DType::kF32;
  Shape grid;
  for (const Value& e : edges) grid.push_back(e.shape()[0] - 1);
  const int64_t total = ir::NumElements(grid);
  Value flat = Constant(0, DType::kS64, {m});
  Value inside = Constant(1, DType::kBool, {m});
  int64_t stride = total;
  for (size_t d = 0; d < edges.size(); ++d) {
    const int64_t e = edges[d].shape()[0];
    stride /= grid[d];
    Value x = Reshape(SliceAxis(points, 1, d, d + 1), {m});
    Value bin = Sub(EdgesAtOrBelow(edges[d], x), Constant(1, DType::kS64, {m}));
    Value last = BroadcastTo(Reshape(SliceAxis(edges[d], 0, e - 1, e), {}), {m});
    bin = Select(Compare(x, last, "EQ"), Constant(e - 2, DType::kS64, {m}), bin);
    Value first = BroadcastTo(Reshape(SliceAxis(edges[d], 0, 0, 1), {}), {m});
    inside = And(inside, And(Compare(x, first, "GE"), Compare(x, last, "LE")));
    flat = Add(flat, Mul(bin, Constant(stride, DType::kS64, {m})));
  }
  // Points outside go to a spare last bin, dropped after the scatter-add.
  flat = Select(inside, flat, Constant(total, DType::kS64, {m}));
  Value amounts = weight ? Convert(weight, acc) : Constant(1, acc, {m});
  Value hist = Reshape(SliceAxis(ScatterAdd1D(amounts, flat, total + 1), 0, 0, total), grid);
  if (density) {
    std::vector<int64_t> all(grid.size());
    for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
    hist = Div(hist, BroadcastTo(SumOver(hist, all), grid));
    for (size_t d = 0; d < edges.size(); ++d) {
      const int64_t e = edges[d].shape()[0];
      Value e_acc = Convert(edges[d], acc);
      Value widths = Sub(SliceAxis(e_acc, 0, 1, e), SliceAxis(e_acc, 0, 0, e - 1));
      hist = Div(hist, BroadcastInDim(widths, grid, {static_cast<int64_t>(d)}));
    }
  }
  return Convert(hist, t);
}

// The (low, high) pair of dim d in a range argument [low0, high0, low1, high1, ...], if given.
std::vector<double> Range(const LoweringContext& ctx, size_t i, int64_t d) {
  if (!ctx.has(i)) return {};
  const std::vector<double>& range = ctx.double_list(i);
  return {range.at(2 * d), range.at(2 * d + 1)};
}

Value OptionalWeight(const LoweringContext& ctx, size_t i, int64_t m) {
  return ctx.is_tensor(i) ? Reshape(ctx.tensor(i), {m}) : Value{};
}

// histogram.bin_ct(self, bins, range?, weight?, density) and
// histogram.bins_tensor(self, bins, weight?, density) -> (hist, bin_edges).
std::vector<Value> HistogramLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const int64_t m = ir::NumElements(self.shape());
  Value points = Reshape(self, {m, 1});
  const bool edges_given = ctx.is_tensor(1);
  Value edges = edges_given ? ctx.tensor(1)
                            : EqualWidthEdges(Reshape(self, {m}), ctx.int_arg(1), Range(ctx, 2, 0));
  const size_t weight_at = edges_given ? 2 : 3;
  Value hist =
      Histogram(points, {edges}, OptionalWeight(ctx, weight_at, m), ctx.bool_arg(weight_at + 1));
  return {hist, edges};
}

// _histogramdd_from_bin_cts(self, bins, range?, weight?, density) and
// _histogramdd_from_bin_tensors(self, bins, weight?, density) -> hist.
std::vector<Value> HistogramddLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const int64_t n = self.shape().back();
  const int64_t m = ir::NumElements(self.shape()) / std::max<int64_t>(n, 1);
  Value points = Reshape(self, {m, n});
  const bool edges_given = ctx.arg(1).kind == Argument::Kind::kTensorList;
  std::vector<Value> edges;
  if (edges_given) {
    edges = ctx.arg(1).tensors;
  } else {
    const std::vector<int64_t>& bins = ctx.int_list(1);
    for (int64_t d = 0; d < n; ++d) {
      edges.push_back(
          EqualWidthEdges(Reshape(SliceAxis(points, 1, d, d + 1), {m}), bins[d], Range(ctx, 2, d)));
    }
  }
  const size_t weight_at = edges_given ? 2 : 3;
  return {Histogram(points, edges, OptionalWeight(ctx, weight_at, m), ctx.bool_arg(weight_at + 1))};
}

LoweringRegistrar registrar({
    {"histogram", HistogramLowering},
    {"_histogramdd_from_bin_cts", HistogramddLowering},
    {"_histogramdd_from_bin_tensors", HistogramddLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
