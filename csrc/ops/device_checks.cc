// The values of the device-side checks (aten/device_checks.h): computed from an op's arguments in
// the op's own program, read back at the next synchronization.
#include <limits>
#include <stdexcept>

#include "ops/builder.h"
#include "ops/growing.h"
#include "ops/lowering.h"

namespace torch_tpu::ops {
namespace {

// {values at the first flagged element, its order} as an i64 [2], where "first" is the least
// `order` (distinct i64s, same shape), or kNoIndexOutOfRange in both when nothing is flagged.
Value FirstFlagged(const Value& flagged, const Value& values, const Value& order) {
  const Shape flat{ir::NumElements(flagged.shape())};
  const Value none = ir::IntegerConstant(kNoIndexOutOfRange, DType::kS64);
  const Value past_end = ir::IntegerConstant(std::numeric_limits<int64_t>::max(), DType::kS64);
  const Value orders = Reshape(order, flat);
  const Value first = Reduce(Select(Reshape(flagged, flat), orders, BroadcastTo(past_end, flat)),
                             {0}, "stablehlo.minimum", past_end);
  const Value at_first = Compare(orders, first, "EQ");
  const Value value = Reduce(Select(at_first, Reshape(values, flat), BroadcastTo(none, flat)), {0},
                             "stablehlo.maximum", none);
  const Value position = Select(Compare(first, past_end, "EQ"), none, first);
  return Concatenate({Reshape(value, {1}), Reshape(position, {1})}, 0);
}

// Row-major positions of a value's elements.
Value RowMajorOrder(const Shape& shape) {
  const Shape flat{ir::NumElements(shape)};
  return Reshape(Iota(TensorType{DType::kS64, flat}, 0), shape);
}

Value Codes(int64_t code, const Shape& shape) { return Constant(code, DType::kS64, shape); }

// multinomial's probabilities [rows, categories]: each entry's code (0 when good) and each row's.
// The CPU's loop for several samples with replacement checks a row's entries, then its sum, row by
// row; its other path checks all entries first, then the sums.
Value ProbabilityCheck(const Value& probabilities, bool row_by_row) {
  const Shape& shape = probabilities.shape();
  const int64_t rows = shape.size() == 2 ? shape[0] : 1, categories = shape.back();
  const Value p = Reshape(probabilities, {rows, categories});
  const Value zero = ConstantLike(0, p);
  const Value negative_or_nan = Not(Compare(p, zero, "GE"));
  const Value infinite =
      Compare(Abs(p), ConstantLike(std::numeric_limits<double>::infinity(), p), "EQ");
  const Shape grid{rows, categories};
  const Value entry_code =
      row_by_row
          ? Select(negative_or_nan, Codes(kNegativeProbability, grid),
                   Select(infinite, Codes(kInfiniteProbability, grid), Codes(0, grid)))
          : Select(Or(negative_or_nan, infinite), Codes(kBadProbabilities, grid), Codes(0, grid));
  const Value sums = Reduce(p, {1}, "stablehlo.add", Constant(0, p.dtype()));
  const Value massless = Compare(sums, ConstantLike(0, sums), "LE");
  // Orders: row r's entries, then its sum at r * (categories + 1) + categories (row by row), or
  // all entries, then the sums after them.
  const Value row = Iota(TensorType{DType::kS64, grid}, 0);
  const Value column = Iota(TensorType{DType::kS64, grid}, 1);
  const Value row_of_sum = Iota(TensorType{DType::kS64, {rows}}, 0);
  Value entry_order, sum_order;
  if (row_by_row) {
    const Value stride = Constant(categories + 1, DType::kS64, grid);
    entry_order = Add(Mul(row, stride), column);
    sum_order = Add(Mul(row_of_sum, Constant(categories + 1, DType::kS64, {rows})),
                    Constant(categories, DType::kS64, {rows}));
  } else {
    entry_order = RowMajorOrder(grid);
    sum_order = Add(row_of_sum, Constant(rows * categories, DType::kS64, {rows}));
  }
  const Shape all{rows * categories + rows};
  const Value codes =
      Concatenate({Reshape(entry_code, {rows * categories}),
                   Select(massless, Codes(kMasslessDistribution, {rows}), Codes(0, {rows}))},
                  0);
  const Value order = Concatenate({Reshape(entry_order, {rows * categories}), sum_order}, 0);
  return FirstFlagged(Compare(codes, Codes(0, all), "NE"), codes, order);
}

}  // namespace

Value OutOfRangeIndex(const Value& index, const Value& size, bool wrapping,
                      const GrowingValue& grown, const Value& ignored) {
  const Value i = Convert(grown ? grown.padded : index, DType::kS64);
  const Value low = wrapping ? Neg(size) : Constant(0, DType::kS64);
  Value out = Or(Compare(i, low, "LT"), Compare(i, size, "GE"));
  if (ignored) out = And(out, Compare(i, ignored, "NE"));
  if (grown) {  // the padding past the length holds no index
    const Value position = Iota(TensorType{DType::kS64, i.shape()}, grown.dim);
    out = And(out, Compare(position, grown.length_parameter, "LT"));
  }
  return FirstFlagged(out, i, RowMajorOrder(i.shape()));
}

Value OutsideDomain(const Value& x, ValueDomain domain) {
  // Computed in f32 at least: a bf16 1.0 compares as 1.
  const DType t = x.dtype() == DType::kF64 ? DType::kF64 : DType::kF32;
  const Value v = Convert(x, t);
  switch (domain) {
    case ValueDomain::kUnitInterval: {  // NaN is outside: it compares false
      const Value inside =
          And(Compare(v, ConstantLike(0, v), "GE"), Compare(v, ConstantLike(1, v), "LE"));
      return FirstFlagged(Not(inside), Codes(0, v.shape()), RowMajorOrder(v.shape()));
    }
    case ValueDomain::kNonNegative:  // NaN is outside, as the CPU's min() >= 0
      return FirstFlagged(Not(Compare(v, ConstantLike(0, v), "GE")), Codes(0, v.shape()),
                          RowMajorOrder(v.shape()));
    case ValueDomain::kProbabilities:
      return ProbabilityCheck(v, /*row_by_row=*/false);
    case ValueDomain::kSampledProbabilities:
      return ProbabilityCheck(v, /*row_by_row=*/true);
  }
  throw std::logic_error("OutsideDomain: unknown domain");
}

Value MaskOutnumbers(const Value& mask, int64_t copies, int64_t available) {
  const Shape flat{ir::NumElements(mask.shape())};
  const Value ones = Convert(Convert(Reshape(mask, flat), DType::kBool), DType::kS64);
  const Value zero = ir::IntegerConstant(0, DType::kS64);
  const Value count = Reshape(
      Mul(Reduce(ones, {0}, "stablehlo.add", zero), ir::IntegerConstant(copies, DType::kS64)), {1});
  const Value outnumbered =
      Compare(count, Reshape(ir::IntegerConstant(available, DType::kS64), {1}), "GT");
  return FirstFlagged(outnumbered, count, Codes(0, {1}));
}

Value NonFiniteDataRange(const Value& x) {
  const DType t = x.dtype() == DType::kF64 ? DType::kF64 : DType::kF32;
  const Shape flat{ir::NumElements(x.shape())};
  const double inf = std::numeric_limits<double>::infinity();
  const Value v = Convert(Reshape(x, flat), t);
  auto any = [&](const Value& flags) {
    return Reshape(Reduce(flags, {0}, "stablehlo.or", ir::IntegerConstant(0, DType::kBool)), {1});
  };
  const Value nan = any(IsNan(v));
  const Value finite =
      Not(any(Not(ir::MakeOp("stablehlo.is_finite", {v}, TensorType{DType::kBool, flat}))));
  // The CPU's min and max are NaN when any element is; XLA's CPU backend drops NaN in a min or
  // max reduce (ops/reduction.cc), so it is put in by hand.
  auto edge = [&](const char* combine, double identity) {
    const Value reduced = Reshape(Reduce(v, {0}, combine, ir::ScalarConstant(identity, t)), {1});
    const Value value =
        Select(nan, Constant(std::numeric_limits<double>::quiet_NaN(), t, {1}), reduced);
    const DType bits_type = t == DType::kF64 ? DType::kS64 : DType::kU32;
    return Convert(ir::MakeOp("stablehlo.bitcast_convert", {value}, TensorType{bits_type, {1}}),
                   DType::kS64);
  };
  const Value range =
      Concatenate({edge("stablehlo.minimum", inf), edge("stablehlo.maximum", -inf)}, 0);
  return Select(BroadcastTo(Reshape(finite, {}), {2}),
                Constant(kNoIndexOutOfRange, DType::kS64, {2}), range);
}

}  // namespace torch_tpu::ops
