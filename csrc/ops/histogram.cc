// Lowerings for counting ops whose result size is fixed by their arguments: histc, mode, frexp,
// tril_indices and triu_indices. (The data-dependent ones, bincount, unique and
// repeat_interleave, are kernels in aten/kernels.cc that read their size on the host.)
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

Value S64(int64_t value) { return ir::IntegerConstant(value, DType::kS64); }

// ---- histc ----

// The histogram edges as the CPU picks them: the given [min, max], or the data's range when
// min == max, widened by 1 each way when that range is a single point. Edges are in the input's
// dtype, as the CPU's linspace of them is.
std::pair<Value, Value> HistogramEdges(const LoweringContext& ctx, const Value& x) {
  const double min = ctx.double_arg(2), max = ctx.double_arg(3);
  const DType t = x.dtype();
  if (ir::IsIntegral(t)) {  // x is s64 here; min and max truncate, as CUDA's integer histc does
    if (min != max) return {S64(static_cast<int64_t>(min)), S64(static_cast<int64_t>(max))};
    Value low = Reduce(x, {0}, "stablehlo.minimum", S64(std::numeric_limits<int64_t>::max()));
    Value high = Reduce(x, {0}, "stablehlo.maximum", S64(std::numeric_limits<int64_t>::min()));
    Value point = Compare(low, high, "EQ");
    return {Select(point, Sub(low, S64(1)), low), Select(point, Add(high, S64(1)), high)};
  }
  if (min != max) {
    // The meta function checks min < max but not finiteness.
    if (!std::isfinite(min) || !std::isfinite(max)) {
      std::ostringstream message;
      message << "torch.histc: range of [" << min << ", " << max << "] is not finite";
      throw std::runtime_error(message.str());
    }
    return {ctx.ScalarParameter(ctx.scalar(2), t), ctx.ScalarParameter(ctx.scalar(3), t)};
  }
  // Taken from the data on the device. The CPU rejects a non-finite data range: a device-side
  // check raises that at the next synchronization (aten/device_checks.h).
  const double inf = std::numeric_limits<double>::infinity();
  Value low = Reduce(x, {0}, "stablehlo.minimum", ir::ScalarConstant(inf, t));
  Value high = Reduce(x, {0}, "stablehlo.maximum", ir::ScalarConstant(-inf, t));
  const DType w = OpMathType(t);
  Value point = Compare(low, high, "EQ");
  Value one = Constant(1, w);
  low = Select(point, Convert(Sub(Convert(low, w), one), t), low);
  high = Select(point, Convert(Add(Convert(high, w), one), t), high);
  return {low, high};
}

// histc(self, bins, min, max): counts of the elements in `bins` equal-width bins over the edges;
// elements outside them (and NaN) are not counted, the last bin includes its right edge. The bin
// is the CPU's truncated (x - low) * bins / (high - low), in the input's dtype. Counts accumulate
// in f32 (the CPU adds in the input's dtype, so its bf16 counts stop growing at 256).
// Integer inputs, which the CPU rejects, count as on CUDA (Hugging Face's MoE layers pass int
// expert ids off the CPU): in s64, with the bin (x - low) * bins / (high - low) truncated.
std::vector<Value> HistcLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  Value x = ctx.tensor(0);
  if (!ir::IsIntegral(x.dtype())) CheckFloatingKernel("histogram_cpu", x.dtype());
  const int64_t bins = out.shape[0];
  const int64_t n = ir::NumElements(x.shape());
  x = Reshape(x, {n});
  if (ir::IsIntegral(x.dtype())) x = Convert(x, DType::kS64);
  auto [low, high] = HistogramEdges(ctx, x);
  Value low_n = BroadcastTo(low, {n}), high_n = BroadcastTo(high, {n});
  Value bin = Convert(Div(Mul(Sub(x, low_n), Constant(bins, x.dtype(), {n})), Sub(high_n, low_n)),
                      DType::kS64);
  bin = Select(Compare(bin, BroadcastTo(S64(bins), {n}), "EQ"),
               Constant(bins - 1, DType::kS64, {n}), bin);
  Value inside = And(Compare(x, low_n, "GE"), Compare(x, high_n, "LE"));
  // Elements outside the range go to a spare last bin, dropped after the scatter-add.
  bin = Select(inside, bin, Constant(bins, DType::kS64, {n}));
  const DType w = OpMathType(out.dtype);
  Value counts = SliceAxis(ScatterAdd1D(Constant(1, w, {n}), bin, bins + 1), 0, 0, bins);
  return {Convert(counts, out.dtype)};
}

// ---- mode ----

// The element of `values` where `pick` (one true per row along dim) holds, keeping dim as size 1:
// an "or" of bit patterns, exact for every dtype (-0.0 and NaN included).
Value TakePicked(const Value& values, const Value& pick, int64_t dim) {
  if (values.dtype() == DType::kBool) {
    Value taken =
        Reduce(And(values, pick), {dim}, "stablehlo.or", ir::IntegerConstant(0, DType::kBool));
    return KeepDims(taken, values.shape(), {dim});
  }
  const size_t width = ir::ByteSize(values.dtype());
  const DType bits_type = width == 1   ? DType::kU8
                          : width == 2 ? DType::kU16
                          : width == 4 ? DType::kU32
                                       : DType::kU64;
  TensorType bits_shape{bits_type, values.shape()};
  Value bits = ir::MakeOp("stablehlo.bitcast_convert", {values}, bits_shape);
  Value taken = Reduce(Select(pick, bits, Constant(0, bits_type, values.shape())), {dim},
                       "stablehlo.or", ir::IntegerConstant(0, bits_type));
  Shape kept = values.shape();
  kept[dim] = 1;
  return ir::MakeOp("stablehlo.bitcast_convert", {KeepDims(taken, values.shape(), {dim})},
                    TensorType{values.dtype(), kept});
}

// mode(self, dim, keepdim): the most frequent value of each row and an index of it, picked as the
// CPU does: it sorts the row, walks the runs of equal values and keeps the first run (so the
// smallest value) of the largest count, reporting the position of the run's last element. The
// sort here is stable, so that is the value's last occurrence; the CPU's std::sort is stable only
// for rows of at most 16 elements, so for longer rows its index may name another occurrence.
// NaNs are each their own run (the CPU's order of NaNs is unspecified).
std::vector<Value> ModeLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  if (x.rank() == 0) x = Reshape(x, {1});
  const int64_t dim = NormalizeDim(ctx.int_arg(1, -1), x.rank());
  const int64_t n = x.shape()[dim];
  // The meta function leaves this check to the CPU kernel.
  if (n == 0) {
    throw std::out_of_range("mode(): Expected reduction dim " + std::to_string(dim) +
                            " to have non-zero size.");
  }
  auto [values, indices] = SortAlong(x, dim, /*descending=*/false);
  const TensorType position_type{DType::kS64, x.shape()};
  Value position = Iota(position_type, dim);
  Value run_start = Constant(1, DType::kBool, x.shape());
  Value run_end = run_start;
  if (n > 1) {
    Value differs = Compare(SliceAxis(values, dim, 1, n), SliceAxis(values, dim, 0, n - 1), "NE");
    std::vector<int64_t> none(x.rank(), 0), one = none;
    one[dim] = 1;
    Value yes = ir::IntegerConstant(1, DType::kBool);
    run_start = Pad(differs, yes, one, none, none);
    run_end = Pad(differs, yes, none, one, none);
  }
  // Each element's run starts at the latest run start at or before it.
  Value start = InclusiveScan(
      {Select(run_start, position, Constant(0, DType::kS64, x.shape()))}, dim, {S64(0)},
      [](const std::vector<Value>& earlier, const std::vector<Value>& later) {
        return std::vector<Value>{Max(earlier[0], later[0])};
      })[0];
  Value count = Select(run_end, Add(Sub(position, start), Constant(1, DType::kS64, x.shape())),
                       Constant(0, DType::kS64, x.shape()));
  Value largest = BroadcastTo(
      KeepDims(Reduce(count, {dim}, "stablehlo.maximum", S64(0)), x.shape(), {dim}), x.shape());
  Value candidates =
      Select(Compare(count, largest, "EQ"), position, Constant(n, DType::kS64, x.shape()));
  Value first = KeepDims(Reduce(candidates, {dim}, "stablehlo.minimum", S64(n)), x.shape(), {dim});
  Value pick = Compare(position, BroadcastTo(first, x.shape()), "EQ");
  return {Reshape(TakePicked(values, pick, dim), ctx.output(0).shape),
          Reshape(TakePicked(indices, pick, dim), ctx.output(1).shape)};
}

// ---- frexp ----

// The layout of an IEEE binary format.
struct FloatFormat {
  DType bits;             // the same-width integer type
  int64_t width;          // bits in all
  int64_t mantissa_bits;  // stored fraction bits
  int64_t bias;
};

// frexp(self) -> (mantissa, exponent): x = mantissa * 2^exponent with |mantissa| in [0.5, 1); 0,
// inf and NaN keep x with exponent 0, as the C library's frexp gives on the CPU. Half types go
// through f32, as the CPU's kernel does. All integer work on the bits: the XLA CPU plugin flushes
// subnormal operands of float arithmetic to zero, and frexp must see them.
std::vector<Value> FrexpLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const DType w = x.dtype() == DType::kF64 ? DType::kF64 : DType::kF32;
  const FloatFormat f = w == DType::kF64 ? FloatFormat{DType::kS64, 64, 52, 1023}
                                         : FloatFormat{DType::kS32, 32, 23, 127};
  const Shape& shape = x.shape();
  const TensorType type{f.bits, shape};
  auto constant = [&](int64_t v) { return BroadcastTo(ir::IntegerConstant(v, f.bits), shape); };
  auto bitwise = [&](const char* op, const Value& a, const Value& b) {
    return ir::MakeOp(op, {a, b}, type);
  };
  const int64_t sign_bit = std::numeric_limits<int64_t>::min() >> (64 - f.width);
  const int64_t fraction_mask = (int64_t{1} << f.mantissa_bits) - 1;
  const int64_t all_ones_exponent = (int64_t{1} << (f.width - 1 - f.mantissa_bits)) - 1;
  Value bits = ir::MakeOp("stablehlo.bitcast_convert", {Convert(x, w)}, type);
  Value sign = bitwise("stablehlo.and", bits, constant(sign_bit));
  Value magnitude = bitwise("stablehlo.and", bits, constant(~sign_bit));
  Value biased = bitwise("stablehlo.shift_right_logical", magnitude, constant(f.mantissa_bits));
  Value fraction = bitwise("stablehlo.and", magnitude, constant(fraction_mask));
  Value zero = constant(0);
  Value subnormal = And(Compare(biased, zero, "EQ"), Compare(fraction, zero, "NE"));
  Value special =
      Or(Compare(magnitude, zero, "EQ"), Compare(biased, constant(all_ones_exponent), "EQ"));
  // A subnormal fraction with its leading one at bit p is normalized by moving that one to the
  // implicit position; its value lies in [2^(p + 1 - bias - m), twice that).
  Value leading =
      Sub(constant(f.width - 1), ir::MakeOp("stablehlo.count_leading_zeros", {fraction}, type));
  Value normalized =
      bitwise("stablehlo.and",
              bitwise("stablehlo.shift_left", fraction, Sub(constant(f.mantissa_bits), leading)),
              constant(fraction_mask));
  fraction = Select(subnormal, normalized, fraction);
  Value exponent = Select(subnormal, Add(leading, constant(2 - f.bias - f.mantissa_bits)),
                          Sub(biased, constant(f.bias - 1)));
  Value half_bits = Or(Or(sign, constant((f.bias - 1) << f.mantissa_bits)), fraction);
  Value mantissa = ir::MakeOp("stablehlo.bitcast_convert", {half_bits}, TensorType{w, shape});
  mantissa = Select(special, Convert(x, w), mantissa);
  exponent = Select(special, zero, exponent);
  return {Convert(mantissa, ctx.output(0).dtype), Convert(exponent, ctx.output(1).dtype)};
}

// ---- tril_indices / triu_indices ----

struct RowsAndColumns {
  Value rows, columns;  // s64 [count]
};

// The (row, column) of the j-th element, in row-major order, of the lower triangle c - r <= offset
// of a rows x columns matrix, for s64 positions j. Row r holds clamp(r + offset + 1, 0, columns)
// elements: empty rows, then a trapezoid of rows growing by one from `first` elements, then full
// rows. A trapezoid row t solves t * first + t (t - 1) / 2 <= j; the f32 root is corrected by
// integer checks, so it is exact however large j is.
RowsAndColumns LowerTriangle(const Value& j, int64_t rows, int64_t columns, int64_t offset) {
  const Shape& shape = j.shape();
  auto constant = [&](int64_t v) { return Constant(static_cast<double>(v), DType::kS64, shape); };
  const int64_t first_row = std::max<int64_t>(0, -offset);
  const int64_t first = first_row + offset + 1;  // elements in the first non-empty row
  const int64_t full_row = std::clamp<int64_t>(columns - offset - 1, first_row, rows);
  const int64_t trapezoid_rows = full_row - first_row;
  const int64_t trapezoid = trapezoid_rows * (2 * first + trapezoid_rows - 1) / 2;
  // Elements before trapezoid row t.
  auto before = [&](const Value& t) {
    return Add(Mul(t, constant(first)), Div(Mul(t, Sub(t, constant(1))), constant(2)));
  };
  // t = 4j / (b + sqrt(b^2 + 8j)) with b = 2 first - 1: the root without cancellation.
  Value jf = Convert(j, DType::kF32);
  const double b = 2.0 * static_cast<double>(first) - 1;
  Value root =
      Sqrt(Add(Constant(b * b, DType::kF32, shape), Mul(Constant(8, DType::kF32, shape), jf)));
  Value t = Convert(Unary("stablehlo.floor", Div(Mul(Constant(4, DType::kF32, shape), jf),
                                                 Add(Constant(b, DType::kF32, shape), root))),
                    DType::kS64);
  for (int step = 0; step < 2; ++step) {
    t = Select(Compare(before(t), j, "GT"), Sub(t, constant(1)), t);
    t = Select(Compare(before(Add(t, constant(1))), j, "LE"), Add(t, constant(1)), t);
  }
  Value in_trapezoid = Compare(j, constant(trapezoid), "LT");
  Value beyond = Sub(j, constant(trapezoid));
  Value full = Div(beyond, constant(std::max<int64_t>(columns, 1)));
  Value row = Select(in_trapezoid, Add(t, constant(first_row)), Add(full, constant(full_row)));
  Value column = Select(in_trapezoid, Sub(j, before(t)), Sub(beyond, Mul(full, constant(columns))));
  return {row, column};
}

// tril_indices / triu_indices(row, col, offset, dtype, ...): a [2, count] tensor of the rows and
// columns of the triangle's elements in row-major order. The upper triangle c - r >= offset is
// the lower triangle c' - r' <= col - row - offset of the matrix turned by 180 degrees
// (r' = row - 1 - r, c' = col - 1 - c), whose row-major order runs backwards.
template <bool kUpper>
std::vector<Value> TriangleIndicesLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const int64_t rows = ctx.int_arg(0), columns = ctx.int_arg(1), offset = ctx.int_arg(2, 0);
  const int64_t count = out.shape[1];
  Value j = Iota({DType::kS64, {count}}, 0);
  RowsAndColumns at;
  if (kUpper) {
    at = LowerTriangle(Sub(Constant(count - 1, DType::kS64, {count}), j), rows, columns,
                       columns - rows - offset);
    at.rows = Sub(Constant(rows - 1, DType::kS64, {count}), at.rows);
    at.columns = Sub(Constant(columns - 1, DType::kS64, {count}), at.columns);
  } else {
    at = LowerTriangle(j, rows, columns, offset);
  }
  return {Convert(Concatenate({Reshape(at.rows, {1, count}), Reshape(at.columns, {1, count})}, 0),
                  out.dtype)};
}

LoweringRegistrar registrar({
    {"histc", HistcLowering},
    {"mode", ModeLowering},
    {"frexp", FrexpLowering},
    {"tril_indices", TriangleIndicesLowering<false>},
    {"triu_indices", TriangleIndicesLowering<true>},
});

}  // namespace
}  // namespace torch_tpu::ops
