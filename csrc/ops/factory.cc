// Lowerings for the factory op family: arange, linspace, logspace, eye. (empty/zeros/ones/full
// and the *_like / new_* factories reach us as empty + fill_/zero_, owned by elementwise.cc.)
// Start, end and step are runtime parameters, so only the element count is in the signature.
#include "ops/builder.h"
#include "ops/growing.h"

namespace torch_tpu::ops {

namespace {

// The type the CPU accumulates a float range in (arange keeps f32 rather than the CPU's f64, so
// the program also runs where f64 is unavailable; results differ by at most an ulp or two).
DType FloatRangeType(DType dtype) { return dtype == DType::kF64 ? DType::kF64 : DType::kF32; }

Value Indices(int64_t count, DType dtype) { return Iota(TensorType{dtype, {count}}, 0); }

// arange.start_out(start, end, step) and arange.out(end): start + step * i, like the CPU.
std::vector<Value> LowerArange(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (out.dtype == DType::kBool)
    throw UnsupportedError("\"arange_cpu\" not implemented for 'Bool'");
  const bool end_only = ctx.size() == 1;
  Scalar start, step;
  step.i = 1;
  if (!end_only) {
    start = ctx.scalar(0);
    step = ctx.scalar(2);
  }
  // Integer ranges are computed in int64 from the truncated start and step, as the CPU does.
  const DType compute = IsFloating(out.dtype) ? FloatRangeType(out.dtype) : DType::kS64;
  Value start_value = ctx.ScalarParameter(start, compute);
  Value step_value = ctx.ScalarParameter(step, compute);
  auto range = [&](int64_t count) {
    return Convert(Add(start_value, Mul(step_value, Indices(count, compute))), out.dtype);
  };
  // A range that grows step by step (a decoding step's key positions) is also given padded to its
  // bucket (ops/growing.h), so the mask built from it compiles once per bucket.
  const int64_t length = out.shape[0];
  if (const int64_t bucket = ctx.range_bucket ? ctx.range_bucket(length) : 0) {
    Scalar count;
    count.i = length;
    const Value length_parameter = ctx.ScalarParameter(count, DType::kS64);
    ctx.growing_results = {PaddedResult(range(bucket), 0, length_parameter, length)};
  }
  return {range(length)};
}

// The CPU's linspace: the first half counts up from start, the second half down from end, so
// both endpoints are exact.
Value FloatLinspace(const Value& start, const Value& end, int64_t steps) {
  const DType dtype = start.dtype();
  if (steps == 1) return Reshape(start, {1});
  Value step = Div(Sub(end, start), ScalarConstant(static_cast<double>(steps - 1), dtype));
  Value index = Indices(steps, dtype);
  Value from_start = Add(start, Mul(step, index));
  Value from_end = Sub(end, Mul(step, Sub(ScalarConstant(steps - 1, dtype), index)));
  Value first_half =
      Compare(Indices(steps, DType::kS64), IntegerConstant(steps / 2, DType::kS64), "LT");
  return Select(first_half, from_start, from_end);
}

// Integer linspace truncates start + (end - start) * i / (steps - 1), computed exactly in int64.
// The CPU goes through f64, in a vectorized or scalar loop depending on the position and the
// host's vector width, so where the exact value is an integer its f64 rounding can land one
// below (it is not self-consistent there); everywhere else the two agree.
Value IntegerLinspace(const Value& start, const Value& end, int64_t steps) {
  if (steps == 1) return Reshape(start, {1});
  Value intervals = IntegerConstant(steps - 1, DType::kS64);
  Value numerator = Add(Mul(start, intervals), Mul(Sub(end, start), Indices(steps, DType::kS64)));
  return Div(numerator, intervals);  // stablehlo.divide truncates toward zero, like the CPU cast
}

// The endpoints as values of `compute`, rounded through the output dtype first like the CPU
// (start and end are converted to scalar_t before the step is computed).
std::pair<Value, Value> Endpoints(LoweringContext& ctx, DType out_dtype, DType compute) {
  return {Convert(ctx.value(0, out_dtype), compute), Convert(ctx.value(1, out_dtype), compute)};
}

// linspace.out(start, end, steps).
std::vector<Value> LowerLinspace(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const int64_t steps = out.shape[0];
  if (out.dtype == DType::kBool)
    throw UnsupportedError("\"linspace_cpu\" not implemented for 'Bool'");
  if (IsFloating(out.dtype)) {
    auto [start, end] = Endpoints(ctx, out.dtype, FloatRangeType(out.dtype));
    return {Convert(FloatLinspace(start, end, steps), out.dtype)};
  }
  if (IsComplex(out.dtype)) {
    // Componentwise: the CPU's complex step and its products with the index scale both parts by
    // real numbers.
    const Value start = ctx.value(0, out.dtype), end = ctx.value(1, out.dtype);
    return {MakeComplex(FloatLinspace(Real(start), Real(end), steps),
                        FloatLinspace(Imag(start), Imag(end), steps))};
  }
  auto [start, end] = Endpoints(ctx, out.dtype, DType::kS64);
  return {Convert(IntegerLinspace(start, end, steps), out.dtype)};
}

// logspace.out(start, end, steps, base): base ** linspace(start, end, steps).
std::vector<Value> LowerLogspace(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (!IsFloating(out.dtype)) {
    // The CPU goes through f64 pow and truncates; an f32 pow would be off by one at exact powers.
    throw UnsupportedError("logspace with an integer dtype");
  }
  const DType compute = FloatRangeType(out.dtype);
  auto [start, end] = Endpoints(ctx, out.dtype, compute);
  Value exponent = FloatLinspace(start, end, out.shape[0]);
  Value base = ctx.ScalarParameter(ctx.scalar(3), compute);
  return {
      Convert(Binary("stablehlo.power", BroadcastTo(base, exponent.shape()), exponent), out.dtype)};
}

// eye.out(n) and eye.m_out(n, m): ones where row == column.
std::vector<Value> LowerEye(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  TensorType index{DType::kS64, out.shape};
  return {Convert(Compare(Iota(index, 0), Iota(index, 1), "EQ"), out.dtype)};
}

const LoweringRegistrar registrar{
    {"arange", LowerArange},
    {"linspace", LowerLinspace},
    {"logspace", LowerLogspace},
    {"eye", LowerEye},
};

}  // namespace

}  // namespace torch_tpu::ops
