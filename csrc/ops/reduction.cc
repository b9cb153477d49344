// Lowerings for the reduction op family: sum, mean, prod, amax/amin, max/min, argmax/argmin,
// all/any, var/std, vector norms, cumulative sums, products and extrema, softmax and their
// relatives.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

using Kind = Argument::Kind;

// The binary op that combines two elements of a reduction or a scan.
enum class Combine { kSum, kProd, kMax, kMin, kAnd, kOr };

const char* OpOf(Combine combine) {
  switch (combine) {
    case Combine::kSum:
      return "stablehlo.add";
    case Combine::kProd:
      return "stablehlo.multiply";
    case Combine::kMax:
      return "stablehlo.maximum";
    case Combine::kMin:
      return "stablehlo.minimum";
    case Combine::kAnd:
      return "stablehlo.and";
    case Combine::kOr:
      return "stablehlo.or";
  }
  return "";
}

// The smallest (or largest) value of dtype, the identity of max (or min).
Value Extreme(DType dtype, bool lowest) {
  if (ir::IsFloating(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    return ir::ScalarConstant(lowest ? -inf : inf, dtype);
  }
  if (dtype == DType::kBool) return ir::IntegerConstant(lowest ? 0 : 1, dtype);
  const int bits = static_cast<int>(ir::ByteSize(dtype) * 8);
  if (ir::IsUnsignedInteger(dtype)) return ir::IntegerConstant(lowest ? 0 : -1, dtype);
  const int64_t max =
      bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
  return ir::IntegerConstant(lowest ? -max - 1 : max, dtype);
}

Value Identity(Combine combine, DType dtype) {
  switch (combine) {
    case Combine::kSum:
    case Combine::kOr:
      return ir::IntegerConstant(0, dtype);
    case Combine::kProd:
    case Combine::kAnd:
      return ir::IntegerConstant(1, dtype);
    case Combine::kMax:
      return Extreme(dtype, /*lowest=*/true);
    case Combine::kMin:
      return Extreme(dtype, /*lowest=*/false);
  }
  return Value{};
}

// Combines two values. Floating max/min propagate NaN like the CPU; an explicit select, because
// XLA's CPU backend drops NaN in a maximum reduce (max of [1, nan, 3] gave 3).
Value CombineValues(Combine combine, const Value& a, const Value& b) {
  const bool extremum = combine == Combine::kMax || combine == Combine::kMin;
  if (!extremum || !ir::IsFloating(a.dtype())) return Binary(OpOf(combine), a, b);
  Value a_wins = Or(IsNan(a), Compare(a, b, combine == Combine::kMax ? "GT" : "LT"));
  return Select(a_wins, a, b);
}

// Reduces `dims` (sorted or not) of x with `combine`, starting from its identity.
Value ReduceWith(const Value& x, const std::vector<int64_t>& dims, Combine combine) {
  if (dims.empty()) return x;
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  Shape shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!std::binary_search(sorted.begin(), sorted.end(), i)) shape.push_back(x.shape()[i]);
  }
  const TensorType scalar{x.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{CombineValues(combine, a[0], a[1])};
  });
  return ir::MakeMultiOp("stablehlo.reduce", {x, Identity(combine, x.dtype())},
                         {TensorType{x.dtype(), shape}}, "dimensions = " + ir::I64Array(sorted),
                         {std::move(body)})[0];
}

// The dims an optional `int[1]?` or `int` argument names; absent or empty means all dims.
std::vector<int64_t> ReductionDims(const LoweringContext& ctx, size_t i, int64_t rank) {
  if (!ctx.has(i)) return NormalizeDims({}, rank);
  const Argument& a = ctx.arg(i);
  if (a.kind == Kind::kIntList) return NormalizeDims(a.ints, rank);
  return NormalizeDims({ctx.int_arg(i)}, rank);
}

// True when argument 1 is the dim (list) of sum/prod/mean rather than their dtype. A list is
// always a dim; an int is a dim except in the overloads whose second argument is the dtype (a
// ScalarType arrives as an int: the schema's fake type).
bool HasDimArgument(const LoweringContext& ctx) {
  if (!ctx.has(1)) return false;
  if (ctx.arg(1).kind == Kind::kIntList) return true;
  const bool dtype_second =
      ctx.overload.empty() || ctx.overload == "out" || ctx.overload == "dtype_out";
  return ctx.arg(1).kind == Kind::kInt && !dtype_second;
}

int64_t CountOf(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= shape[d];
  return count;
}

// Reshapes a reduced value to the output's shape (keepdim or not) and converts to its dtype.
Value Finish(const Value& value, const TensorType& output) {
  return Convert(Reshape(value, output.shape), output.dtype);
}

// The input as the output dtype (PyTorch casts before reducing), widened for accumulation.
Value AccumulationInput(const Value& x, DType output_dtype) {
  return Convert(Convert(x, output_dtype), OpMathType(output_dtype));
}

Value And(const Value& a, const Value& b) { return Binary("stablehlo.and", a, b); }

// ---- Argument checks the CPU kernels make but the meta functions skip (same messages) ----

// Becomes a RuntimeError carrying `message`.
[[noreturn]] void Fail(const std::string& message) { throw std::invalid_argument(message); }

void CheckFloatingForVariance(const LoweringContext& ctx, const Value& x) {
  if (!ir::IsFloating(x.dtype()) && !ir::IsComplex(x.dtype())) {
    const std::string op = ctx.name == "var" || ctx.name == "std" ? "std and var" : ctx.name;
    Fail(op + " only support floating point and complex dtypes");
  }
}

void CheckSameScalarType(DType expected, DType found) {
  if (expected != found) {
    Fail(std::string("expected scalar type ") + ScalarTypeName(expected) + " but found " +
         ScalarTypeName(found));
  }
}

// ---- sum, nansum, prod, mean ----

// sum(self, dim?, keepdim, dtype) or sum(self, dtype); prod(self, dim, keepdim, dtype) or
// prod(self, dtype); HasDimArgument tells the two apart.
template <Combine kCombine, bool kSkipNan>
std::vector<Value> AccumulateLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const std::vector<int64_t> dims =
      HasDimArgument(ctx) ? ReductionDims(ctx, 1, x.rank()) : NormalizeDims({}, x.rank());
  Value input = AccumulationInput(x, ctx.output().dtype);
  if (kSkipNan && ir::IsFloating(input.dtype())) {
    input = Select(IsNan(input), ConstantLike(0, input), input);
  }
  return {Finish(ReduceWith(input, dims, kCombine), ctx.output())};
}

// mean(self, dim?, keepdim, dtype) or mean(self, dtype); the meta function rejects integers.
std::vector<Value> MeanLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const std::vector<int64_t> dims =
      HasDimArgument(ctx) ? ReductionDims(ctx, 1, x.rank()) : NormalizeDims({}, x.rank());
  Value input = AccumulationInput(x, ctx.output().dtype);
  Value sum = ReduceWith(input, dims, Combine::kSum);
  Value count = Constant(static_cast<double>(CountOf(x.shape(), dims)), sum.dtype());
  return {Finish(Div(sum, count), ctx.output())};
}

// count_nonzero(self, int[] dim) or count_nonzero(self, int? dim).
std::vector<Value> CountNonzeroLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  Value nonzero = Convert(Convert(x, DType::kBool), DType::kS64);
  return {
      Finish(ReduceWith(nonzero, ReductionDims(ctx, 1, x.rank()), Combine::kSum), ctx.output())};
}

// ---- amax/amin, max/min, aminmax ----

// amax/amin(self, dim[], keepdim). Exact in any dtype, so no widening; NaN propagates.
template <Combine kCombine>
std::vector<Value> ExtremumLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  return {Finish(ReduceWith(x, ReductionDims(ctx, 1, x.rank()), kCombine), ctx.output())};
}

// The extreme of `x` along `dim` and the index of its first occurrence (the first NaN, if any),
// as a variadic reduce over (value, index) pairs.
std::vector<Value> ArgExtremum(const Value& x, int64_t dim, bool is_max) {
  const DType dtype = x.dtype();
  Shape reduced_shape = x.shape();
  reduced_shape.erase(reduced_shape.begin() + dim);
  const TensorType value_type{dtype, {}};
  const TensorType index_type{DType::kS64, {}};
  auto body = ir::MakeRegion(
      {value_type, index_type, value_type, index_type}, [&](const std::vector<Value>& a) {
        const Value &v1 = a[0], &i1 = a[1], &v2 = a[2], &i2 = a[3];
        Value better = Compare(v1, v2, is_max ? "GT" : "LT");
        Value same = Compare(v1, v2, "EQ");
        if (ir::IsFloating(dtype)) {
          // NaN beats every number, as on the CPU; two NaNs tie.
          Value nan1 = IsNan(v1), nan2 = IsNan(v2);
          better = Or(better, And(nan1, Not(nan2)));
          same = Or(same, And(nan1, nan2));
        }
        Value take_first = Or(better, And(same, Compare(i1, i2, "LT")));
        return std::vector<Value>{Select(take_first, v1, v2), Select(take_first, i1, i2)};
      });
  Value indices = Iota(TensorType{DType::kS64, x.shape()}, dim);
  // The initial index never wins a tie against a real element.
  Value init_index = ir::IntegerConstant(std::numeric_limits<int64_t>::max(), DType::kS64);
  return ir::MakeMultiOp("stablehlo.reduce", {x, indices, Extreme(dtype, is_max), init_index},
                         {TensorType{dtype, reduced_shape}, TensorType{DType::kS64, reduced_shape}},
                         "dimensions = " + ir::I64Array({dim}), {std::move(body)});
}

// max/min: max(self) reduces everything; max.dim(self, dim, keepdim) returns values and indices;
// max.other / max.out(self, other) are the elementwise maximum, NaN-propagating like the CPU
// (PyTorch 2.13 routes both to maximum before they reach us; kept for versions that do not).
template <Combine kCombine>
std::vector<Value> MaxMinLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  if (ctx.is_tensor(1)) {
    const DType t = ctx.promoted;
    return {Finish(CombineValues(kCombine, ctx.value(0, t), ctx.value(1, t)), ctx.output())};
  }
  if (!ctx.has(1)) {
    if (ir::NumElements(x.shape()) == 0) {
      Fail(ctx.name +
           "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
           "reduction dim with the 'dim' argument.");
    }
    return {Finish(ReduceWith(x, NormalizeDims({}, x.rank()), kCombine), ctx.output())};
  }
  if (x.rank() == 0)
    return {Finish(x, ctx.output(0)), Finish(Constant(0, DType::kS64), ctx.output(1))};
  auto results = ArgExtremum(x, NormalizeDim(ctx.int_arg(1), x.rank()), kCombine == Combine::kMax);
  return {Finish(results[0], ctx.output(0)), Finish(results[1], ctx.output(1))};
}

// argmax/argmin(self, dim?, keepdim): without a dim, the index into the flattened input.
template <Combine kCombine>
std::vector<Value> ArgExtremumLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  int64_t dim = 0;
  if (ctx.has(1) && x.rank() > 0) {
    dim = NormalizeDim(ctx.int_arg(1), x.rank());
  } else {
    x = Reshape(x, {ir::NumElements(x.shape())});
  }
  return {Finish(ArgExtremum(x, dim, kCombine == Combine::kMax)[1], ctx.output())};
}

// aminmax(self, *, dim?, keepdim) -> (min, max).
std::vector<Value> AminmaxLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const std::vector<int64_t> dims = ReductionDims(ctx, 1, x.rank());
  return {Finish(ReduceWith(x, dims, Combine::kMin), ctx.output(0)),
          Finish(ReduceWith(x, dims, Combine::kMax), ctx.output(1))};
}

// ---- all/any ----

// all/any(self), (self, dim, keepdim) or (self, dim[]?, keepdim). The result is bool, or uint8
// for a uint8 input (the meta function says which).
template <Combine kCombine>
std::vector<Value> LogicalReductionLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const DType result = ctx.output().dtype;
  if (result != DType::kBool && result != DType::kU8) {
    Fail(ctx.name + " only supports bool tensor for result, got: " + ScalarTypeName(result));
  }
  return {Finish(ReduceWith(Convert(x, DType::kBool), ReductionDims(ctx, 1, x.rank()), kCombine),
                 ctx.output())};
}

// ---- var/std ----

struct Moments {
  Value variance;
  Value mean;
};

// Two-pass variance over `dims` with divisor max(N - correction, 0) (so N <= correction gives
// inf or NaN, as on the CPU). Results keep the reduced dims as size 1. A complex input's variance
// is the real mean of |x - mean|^2; its mean stays complex.
Moments VarianceAndMean(const LoweringContext& ctx, const Value& x,
                        const std::vector<int64_t>& dims, const Scalar& correction) {
  const DType t = OpMathType(x.dtype());
  Value input = Convert(x, t);
  Value count = Constant(static_cast<double>(CountOf(x.shape(), dims)), t);
  Value mean = KeepDims(Div(ReduceWith(input, dims, Combine::kSum), count), x.shape(), dims);
  Value deviation = Sub(input, mean);
  const Value re = Real(deviation);
  Value squared = ir::IsComplex(t) ? Add(Mul(re, re), Mul(Imag(deviation), Imag(deviation)))
                                   : Mul(deviation, deviation);
  Value squares = ReduceWith(squared, dims, Combine::kSum);
  const DType real = squares.dtype();
  Value divisor =
      Max(Sub(Convert(count, real), ctx.ScalarParameter(correction, real)), Constant(0, real));
  return {KeepDims(Div(squares, divisor), x.shape(), dims), mean};
}

// var/std/var_mean/std_mean: (self, unbiased), (self, dim?, unbiased, keepdim) or
// (self, dim?, *, correction?, keepdim).
template <bool kSqrt, bool kWithMean>
std::vector<Value> VarianceLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  CheckFloatingForVariance(ctx, x);
  Scalar correction;
  correction.kind = Scalar::Kind::kInt;
  correction.i = 1;
  std::vector<int64_t> dims = NormalizeDims({}, x.rank());
  if (ctx.overload.rfind("correction", 0) == 0) {
    dims = ReductionDims(ctx, 1, x.rank());
    if (ctx.has(2)) correction = ctx.scalar(2);
  } else if (ctx.has(1) && ctx.arg(1).kind == Kind::kBool) {
    correction.i = ctx.bool_arg(1) ? 1 : 0;
  } else {
    dims = ReductionDims(ctx, 1, x.rank());
    correction.i = ctx.bool_arg(2, true) ? 1 : 0;
  }
  Moments moments = VarianceAndMean(ctx, x, dims, correction);
  Value spread = kSqrt ? Unary("stablehlo.sqrt", moments.variance) : moments.variance;
  std::vector<Value> results{Finish(spread, ctx.output(0))};
  if (kWithMean) results.push_back(Finish(moments.mean, ctx.output(1)));
  return results;
}

// ---- linalg_vector_norm ----

// linalg_vector_norm(self, ord, dim?, keepdim, *, dtype?). The special orders are distinct
// programs; any other p is a runtime parameter, so a new p does not recompile.
std::vector<Value> VectorNormLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const std::vector<int64_t> dims = ReductionDims(ctx, 2, x.rank());
  const Scalar ord = ctx.has(1) ? ctx.scalar(1) : Scalar{Scalar::Kind::kInt, 0, 2};
  const double p = ord.ToDouble();
  // Every order depends on |x| alone: a complex input reduces its (real) magnitudes.
  Value input = AccumulationInput(ir::IsComplex(x.dtype()) ? Abs(x) : x, ctx.output().dtype);
  const DType t = input.dtype();
  Value magnitude = Unary("stablehlo.abs", input);
  Value norm;
  if (std::isinf(p)) {
    norm = ReduceWith(magnitude, dims, p > 0 ? Combine::kMax : Combine::kMin);
  } else if (p == 0) {
    norm = ReduceWith(Convert(Convert(input, DType::kBool), t), dims, Combine::kSum);
  } else if (p == 1) {
    norm = ReduceWith(magnitude, dims, Combine::kSum);
  } else if (p == 2) {
    norm = Unary("stablehlo.sqrt", ReduceWith(Mul(input, input), dims, Combine::kSum));
  } else {
    Value exponent = ctx.ScalarParameter(ord, t);
    Value sum = ReduceWith(Binary("stablehlo.power", magnitude, exponent), dims, Combine::kSum);
    norm = Binary("stablehlo.power", sum, Div(Constant(1, t), exponent));
  }
  return {Finish(norm, ctx.output())};
}

// ---- cumulative ops: cumsum, cumprod, cummax, cummin ----

// The scan of one value with a reduction's combination.
Value ScanWith(const Value& x, int64_t dim, Combine combine) {
  return InclusiveScan(
      {x}, dim, {Identity(combine, x.dtype())},
      [combine](const std::vector<Value>& earlier, const std::vector<Value>& later) {
        return std::vector<Value>{CombineValues(combine, later[0], earlier[0])};
      })[0];
}

// cumsum/cumprod(self, dim, *, dtype?): integers and bool accumulate in int64 (the meta function
// sets the dtype), half precision in f32.
template <Combine kCombine>
std::vector<Value> CumulativeLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  Value input = AccumulationInput(x, ctx.output().dtype);
  if (input.rank() == 0) return {Finish(input, ctx.output())};
  return {Finish(ScanWith(input, NormalizeDim(ctx.int_arg(1), x.rank()), kCombine), ctx.output())};
}

// cummax/cummin(self, dim) -> (values, indices). As on the CPU, ties take the later index and a
// NaN, once seen, stays (with the index of the latest NaN): the running pair is the maximum under
// the order (is NaN, value, index), which makes the combination associative.
template <Combine kCombine>
std::vector<Value> CumulativeExtremumLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  const TensorType index_type{DType::kS64, x.shape()};
  if (x.rank() == 0) return {x, Constant(0, DType::kS64)};
  const int64_t dim = NormalizeDim(ctx.int_arg(1), x.rank());
  const bool floating = ir::IsFloating(x.dtype());
  const std::string beats = kCombine == Combine::kMax ? "GE" : "LE";
  auto combine = [&](const std::vector<Value>& earlier, const std::vector<Value>& later) {
    Value later_wins = Compare(later[0], earlier[0], beats);
    if (floating) later_wins = Or(IsNan(later[0]), And(Not(IsNan(earlier[0])), later_wins));
    return std::vector<Value>{Select(later_wins, later[0], earlier[0]),
                              Select(later_wins, later[1], earlier[1])};
  };
  return InclusiveScan({x, Iota(index_type, dim)}, dim,
                       {Identity(kCombine, x.dtype()), Constant(-1, DType::kS64)}, combine);
}

// ---- softmax ----

// The one dim of a softmax-like op (none for a 0-d input).
std::vector<int64_t> SoftmaxDims(const LoweringContext& ctx, size_t i, int64_t rank) {
  if (rank == 0) return {};
  return {NormalizeDim(ctx.int_arg(i), rank)};
}

// _softmax/_log_softmax(self, dim, half_to_float), shifted by the max for stability.
template <bool kLog>
std::vector<Value> SoftmaxLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  if (!ir::IsFloating(x.dtype())) {
    // The CPU has no integer kernel either (NotImplementedError there too).
    throw UnsupportedError(ctx.name + " of an integer or bool tensor");
  }
  // half_to_float (allowed for f16/bf16, as on accelerators) gives f32; otherwise the input's.
  const DType expected = ctx.bool_arg(2) ? DType::kF32 : x.dtype();
  if (ctx.output().dtype != expected) {
    Fail(std::string("Expected out tensor to have dtype ") + CppTypeName(expected) + ", but got " +
         CppTypeName(ctx.output().dtype) + " instead");
  }
  const std::vector<int64_t> dims = SoftmaxDims(ctx, 1, x.rank());
  // Half precision runs in f32, as on the CPU.
  Value input = Convert(x, OpMathType(x.dtype()));
  Value shifted = Sub(input, KeepDims(ReduceWith(input, dims, Combine::kMax), input.shape(), dims));
  Value exp = Unary("stablehlo.exponential", shifted);
  Value sum = KeepDims(ReduceWith(exp, dims, Combine::kSum), input.shape(), dims);
  Value result = kLog ? Sub(shifted, Unary("stablehlo.log", sum)) : Div(exp, sum);
  return {Finish(result, ctx.output())};
}

// _softmax_backward_data / _log_softmax_backward_data(grad_output, output, dim, input_dtype).
template <bool kLog>
std::vector<Value> SoftmaxBackwardLowering(LoweringContext& ctx) {
  CheckSameScalarType(ctx.tensor(0).dtype(), ctx.tensor(1).dtype());
  const DType t = OpMathType(ctx.tensor(1).dtype());
  Value grad = Convert(ctx.tensor(0), t);
  Value output = Convert(ctx.tensor(1), t);
  const std::vector<int64_t> dims = SoftmaxDims(ctx, 2, output.rank());
  auto sum = [&](const Value& v) {
    return KeepDims(ReduceWith(v, dims, Combine::kSum), v.shape(), dims);
  };
  Value result = kLog ? Sub(grad, Mul(Unary("stablehlo.exponential", output), sum(grad)))
                      : Mul(output, Sub(grad, sum(Mul(grad, output))));
  return {Finish(result, ctx.output())};
}

LoweringRegistrar registrar({
    {"sum", AccumulateLowering<Combine::kSum, false>},
    {"nansum", AccumulateLowering<Combine::kSum, true>},
    {"prod", AccumulateLowering<Combine::kProd, false>},
    {"mean", MeanLowering},
    {"count_nonzero", CountNonzeroLowering},
    {"amax", ExtremumLowering<Combine::kMax>},
    {"amin", ExtremumLowering<Combine::kMin>},
    {"max", MaxMinLowering<Combine::kMax>},
    {"min", MaxMinLowering<Combine::kMin>},
    {"argmax", ArgExtremumLowering<Combine::kMax>},
    {"argmin", ArgExtremumLowering<Combine::kMin>},
    {"aminmax", AminmaxLowering},
    {"all", LogicalReductionLowering<Combine::kAnd>},
    {"any", LogicalReductionLowering<Combine::kOr>},
    {"var", VarianceLowering<false, false>},
    {"std", VarianceLowering<true, false>},
    {"var_mean", VarianceLowering<false, true>},
    {"std_mean", VarianceLowering<true, true>},
    {"linalg_vector_norm", VectorNormLowering},
    {"norm", VectorNormLowering},  // its overloads that reach a backend order args the same way
    {"cumsum", CumulativeLowering<Combine::kSum>},
    {"cumprod", CumulativeLowering<Combine::kProd>},
    {"cummax", CumulativeExtremumLowering<Combine::kMax>},
    {"cummin", CumulativeExtremumLowering<Combine::kMin>},
    {"_softmax", SoftmaxLowering<false>},
    {"_log_softmax", SoftmaxLowering<true>},
    {"_softmax_backward_data", SoftmaxBackwardLowering<false>},
    {"_log_softmax_backward_data", SoftmaxBackwardLowering<true>},
});

}  // namespace
}  // namespace torch_tpu::ops
