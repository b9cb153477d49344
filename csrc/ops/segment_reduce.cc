// segment_reduce(data, reduce, lengths?, indices?, offsets?, axis, unsafe, initial) and
// _segment_reduce_backward. Segments run along `axis`; lengths/offsets carry the dims of data
// before axis as batch dims ([B..., S] or [B..., S + 1]). Data is viewed as [B, L, R] and each
// position gets the row b * (S + 1) + its segment of a scatter over [B * (S + 1), R]; positions
// in no segment go to the spare row S of their batch, dropped at the end.
//
// The CPU checks that lengths are non-negative and sum to data.size(axis) (unless unsafe): that
// needs a host read, so here they are not checked. Work is in the op-math type (f32 for bf16).
#include <cmath>
#include <stdexcept>
#include <vector>

#include "ops/builder.h"
#include "ops/row_scatter.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

Value S64(int64_t value) { return ir::IntegerConstant(value, DType::kS64); }

// The segmentation of data's `axis`: where each position's values go, and each segment's length.
struct Segments {
  int64_t batch = 1, positions = 0, segments = 0, inner = 1;
  Value rows;     // s64 [B * L]: b * (S + 1) + segment, or + S when in none
  Value lengths;  // s64 [B, S + 1]: the spare segment's length is 0
  Value inside;   // bool [B * L, 1]: the position lies in a segment
};

// Inclusive running sums of an s64 value along dim 1.
Value RunningSum(const Value& x) {
  return InclusiveScan({x}, 1, {S64(0)},
                       [](const std::vector<Value>& earlier, const std::vector<Value>& later) {
                         return std::vector<Value>{Add(earlier[0], later[0])};
                       })[0];
}

// lengths -> offsets [B, S + 1]: 0 then the running sums.
Value OffsetsOfLengths(const Value& lengths) {
  return Pad(RunningSum(lengths), S64(0), {0, 1}, {0, 0}, {0, 0});
}

// Position j lies in the segment numbered by how many segments ended at or before it: a mark at
// each segment's end (clamped into [0, L]), summed up to j. ends [B, S] -> s64 [B, L].
Value SegmentOfPosition(const Value& ends, int64_t positions) {
  const int64_t batch = ends.shape()[0], s = ends.shape()[1];
  const Shape shape{batch, s};
  Value clamped = Min(Max(ends, Constant(0, DType::kS64, shape)),
                      Constant(static_cast<double>(positions), DType::kS64, shape));
  Value row = Mul(Iota({DType::kS64, shape}, 0), Constant(positions + 1, DType::kS64, shape));
  Value marks = ScatterAdd1D(Constant(1, DType::kS64, {batch * s}), Add(row, clamped),
                             batch * (positions + 1));
  marks = SliceAxis(Reshape(marks, {batch, positions + 1}), 1, 0, positions);
  return RunningSum(marks);
}

Segments Segment(const Value& data, const Value& counts, bool are_offsets, int64_t axis) {
  Segments g;
  const Shape& shape = data.shape();
  for (int64_t d = 0; d < axis; ++d) g.batch *= shape[d];
  for (int64_t d = axis + 1; d < data.rank(); ++d) g.inner *= shape[d];
  g.positions = shape[axis];
  Value c = Convert(counts, DType::kS64);
  c = Reshape(c, {g.batch, c.shape().back()});
  Value offsets = are_offsets ? c : OffsetsOfLengths(c);
  const int64_t s = offsets.shape()[1] - 1;
  g.segments = s;
  Value starts = SliceAxis(offsets, 1, 0, s), ends = SliceAxis(offsets, 1, 1, s + 1);
  Value segment = SegmentOfPosition(ends, g.positions);
  Value position = Iota({DType::kS64, {g.batch, g.positions}}, 1);
  Value first = BroadcastInDim(SliceAxis(offsets, 1, 0, 1), position.shape(), {0, 1});
  Value spare = ConstantLike(static_cast<double>(s), segment);
  Value inside = And(Compare(position, first, "GE"), Compare(segment, spare, "LT"));
  segment = Select(inside, segment, spare);
  g.inside = Reshape(inside, {g.batch * g.positions, 1});
  Value batch = Mul(Iota({DType::kS64, {g.batch, g.positions}}, 0), ConstantLike(s + 1, segment));
  g.rows = Reshape(Add(batch, segment), {g.batch * g.positions});
  g.lengths = Pad(Sub(ends, starts), S64(0), {0, 0}, {0, 1}, {0, 0});
  return g;
}

// A per-segment value [B, S + 1, R] or [B, S + 1] as the value of each position: [B * L, R].
Value PerPosition(const Segments& g, const Value& per_segment) {
  Value rows = Reshape(per_segment, {g.batch * (g.segments + 1), g.inner});
  return GatherRows(rows, g.rows);
}

// The spare segment of [B * (S + 1), R] dropped, shaped as the reduced data.
Value DropSpare(const Segments& g, const Value& rows, const Shape& out_shape) {
  Value grouped = Reshape(rows, {g.batch, g.segments + 1, g.inner});
  return Reshape(SliceAxis(grouped, 1, 0, g.segments), out_shape);
}

// The segmentation by the lengths argument at `lengths_at`, or the offsets one at `offsets_at`.
// The CPU kernel's check on where lengths/offsets put `axis` (the meta function has none).
Segments SegmentsOf(const LoweringContext& ctx, const Value& data, size_t lengths_at,
                    size_t offsets_at, int64_t axis) {
  const bool lengths = ctx.is_tensor(lengths_at);
  if (!lengths && !ctx.is_tensor(offsets_at))
    throw std::runtime_error("segment_reduce(): Either lengths or offsets must be defined.");
  const Value counts = ctx.tensor(lengths ? lengths_at : offsets_at);
  if (counts.rank() - 1 != axis) {
    throw std::runtime_error(std::string("segment_reduce(): Expected axis to be the last dimension "
                                         "of ") +
                             (lengths ? "lengths" : "offsets") + " but got " +
                             std::to_string(axis) + ".");
  }
  return Segment(data, counts, !lengths, axis);
}

// The reduction named `name`, with the CPU's message for others (the meta function has no check).
RowReduce SegmentReduction(const std::string& name) {
  for (const char* known : {"sum", "prod", "mean", "amax", "amin", "max", "min"}) {
    if (name == known) return RowReduceFor(name);
  }
  throw std::runtime_error("reduce argument must be either sum, prod, mean, amax or amin, got " +
                           name);
}

// Where the forward and backward ops keep the arguments they share.
struct SegmentArgumentIndices {
  size_t data, reduce, lengths, offsets, axis;
};

struct SegmentCall {
  Value data;
  std::string name;
  RowReduce reduce;
  DType math;
  Segments segments;
};

SegmentCall ReadSegmentCall(const LoweringContext& ctx, const SegmentArgumentIndices& at) {
  const Value data = ctx.tensor(at.data);
  CheckFloatingKernel("_segment_reduce_cpu", data.dtype());
  const std::string& name = ctx.string_arg(at.reduce);
  const int64_t axis = NormalizeDim(ctx.int_arg(at.axis, 0), data.rank());
  return {data, name, SegmentReduction(name), OpMathType(data.dtype()),
          SegmentsOf(ctx, data, at.lengths, at.offsets, axis)};
}

// segment_reduce(data, reduce, lengths?, indices?, offsets?, axis, unsafe, initial)
std::vector<Value> SegmentReduceLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const SegmentCall call = ReadSegmentCall(ctx, {0, 1, 2, 4, 5});
  const Value& data = call.data;
  const std::string& name = call.name;
  const RowReduce reduce = call.reduce;
  const DType math = call.math;
  const Segments& g = call.segments;
  const bool has_initial = ctx.has(7);
  Value init = has_initial ? ctx.value(7, math) : RowReduceIdentity(reduce, math);
  Value base = BroadcastTo(init, {g.batch * (g.segments + 1), g.inner});
  Value values = Reshape(Convert(data, math), {g.batch * g.positions, g.inner});
  Value result = ScatterRows(base, g.rows, values, reduce);
  if (name == "mean") {
    Value lengths = Convert(Reshape(g.lengths, {g.batch * (g.segments + 1)}), math);
    lengths = BroadcastInDim(lengths, result.shape(), {0});
    Value empty = Compare(lengths, ConstantLike(0, lengths), "EQ");
    // An empty segment is NaN without an initial value, the initial value with one.
    Value when_empty = has_initial ? result : ConstantLike(std::nan(""), result);
    result = Select(empty, when_empty, Div(result, lengths));
  }
  return {Convert(DropSpare(g, result, out.shape), out.dtype)};
}

// The gradient of max/min: positions equal to their segment's result (or NaN) take its gradient;
// where several do, the positive gradients are split between them, as the CPU's kernel does.
Value ExtremeGrad(const Segments& g, const Value& values, const Value& grad, const Value& output) {
  Value hit = Or(IsNan(values), Compare(values, PerPosition(g, output), "EQ"));
  Value taken = Select(hit, grad, ConstantLike(0, grad));
  Value counts = ScatterRows(Constant(0, grad.dtype(), {g.batch * (g.segments + 1), g.inner}),
                             g.rows, Convert(hit, grad.dtype()), RowReduce::kSum);
  Value count = GatherRows(counts, g.rows);
  Value split = And(Compare(count, ConstantLike(2, count), "GE"),
                    Compare(taken, ConstantLike(0, taken), "GT"));
  return Select(split, Div(taken, count), taken);
}

// The gradient of prod: grad * output / x, or for a zero or NaN x the product of the others
// (times the initial value), from the product of the segment's ordinary values and counts of its
// zeros and NaNs.
Value ProdGrad(const Segments& g, const Value& values, const Value& grad, const Value& output,
               const Value& init) {
  const DType t = values.dtype();
  const Shape spread{g.batch * (g.segments + 1), g.inner};
  Value nan = IsNan(values);
  Value zero = Compare(values, ConstantLike(0, values), "EQ");
  Value special = Or(nan, zero);
  auto per_segment = [&](const Value& v, RowReduce r, double base) {
    return GatherRows(ScatterRows(Constant(base, t, spread), g.rows, v, r), g.rows);
  };
  Value ordinary =
      per_segment(Select(special, ConstantLike(1, values), values), RowReduce::kProd, 1);
  Value zeros = Sub(per_segment(Convert(zero, t), RowReduce::kSum, 0), Convert(zero, t));
  Value nans = Sub(per_segment(Convert(nan, t), RowReduce::kSum, 0), Convert(nan, t));
  Value others =
      Select(Compare(nans, ConstantLike(0, nans), "GT"), ConstantLike(std::nan(""), nans),
             Select(Compare(zeros, ConstantLike(0, zeros), "GT"), ConstantLike(0, zeros),
                    ConstantLike(1, zeros)));
  Value exclusive = Mul(Mul(BroadcastTo(init, values.shape()), ordinary), others);
  Value common = Div(Mul(grad, PerPosition(g, output)), values);
  return Select(special, Mul(grad, exclusive), common);
}

// _segment_reduce_backward(grad, output, data, reduce, lengths?, offsets?, axis, initial)
std::vector<Value> SegmentReduceBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const SegmentCall call = ReadSegmentCall(ctx, {2, 3, 4, 5, 6});
  const Value& data = call.data;
  const std::string& name = call.name;
  const RowReduce reduce = call.reduce;
  const DType math = call.math;
  const Segments& g = call.segments;
  // Per-segment values get a zero spare segment so every position can gather one.
  auto extended = [&](size_t i) {
    Value v = Reshape(Convert(ctx.tensor(i), math), {g.batch, g.segments, g.inner});
    return Pad(v, ir::ScalarConstant(0, math), {0, 0, 0}, {0, 1, 0}, {0, 0, 0});
  };
  Value values = Reshape(Convert(data, math), {g.batch * g.positions, g.inner});
  Value grad = PerPosition(g, extended(0));
  Value result = grad;
  if (name == "mean") {
    Value lengths = Convert(g.lengths, math);
    lengths =
        Select(Compare(lengths, ConstantLike(0, lengths), "EQ"), ConstantLike(1, lengths), lengths);
    result = Div(
        grad, PerPosition(g, BroadcastInDim(lengths, {g.batch, g.segments + 1, g.inner}, {0, 1})));
  } else if (reduce == RowReduce::kMax || reduce == RowReduce::kMin) {
    result = ExtremeGrad(g, values, grad, extended(1));
  } else if (reduce == RowReduce::kProd) {
    Value init = ctx.has(7) ? ctx.value(7, math) : ir::ScalarConstant(1, math);
    result = ProdGrad(g, values, grad, extended(1), init);
  }
  // Positions in no segment get no gradient (their prod formula could make a NaN).
  result = Select(BroadcastTo(g.inside, result.shape()), result, ConstantLike(0, result));
  return {Convert(Reshape(result, out.shape), out.dtype)};
}

LoweringRegistrar registrar({
    {"segment_reduce", SegmentReduceLowering},
    {"_segment_reduce_backward", SegmentReduceBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
