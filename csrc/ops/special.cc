// Special functions: lgamma, digamma, polygamma, erfinv, modified Bessel functions, sinc, logit
// (and logit_backward), heaviside, nextafter, logaddexp, logaddexp2 and logcumsumexp.
//
// The gamma-family, erfinv and i1e come from chlo ops, XLA's own expansions of functions that
// StableHLO lacks (the CPU plugin accepts them, as it does chlo.erf). As on PyTorch's CPU
// kernels, f16/bf16 are computed in f32 ("opmath") and rounded once; integer and bool inputs of
// the unary ops promote to the default float dtype.
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {

Value HurwitzZeta(const Value& x, const Value& q);  // special_functions.cc

namespace {

// The bit pattern of a float as a signed integer of its width (its sign is the float's sign bit).
DType IntType(const Value& x) {
  const size_t bytes = ir::ByteSize(x.dtype());
  return bytes == 2 ? DType::kS16 : bytes == 4 ? DType::kS32 : DType::kS64;
}
Value Reinterpret(const Value& x) {
  return ir::MakeOp("stablehlo.bitcast_convert", {x}, TensorType{IntType(x), x.shape()});
}

Value One(DType t) { return Constant(1, t); }
Value IsEqualTo(const Value& x, double value) {
  return Compare(x, Constant(value, x.dtype()), "EQ");
}

std::vector<Value> Result(const LoweringContext& ctx, const Value& value) {
  return {BroadcastTo(Convert(value, ctx.output().dtype), ctx.output().shape)};
}

// ---- unary formulas (x already in opmath) ----

Value Lgamma(const Value& x) { return Unary("chlo.lgamma", x); }
// The CPU gives -inf at +0 and +inf at -0 (chlo.digamma gives NaN at both).
Value Digamma(const Value& x) {
  const Value infinity = Constant(INFINITY, x.dtype());
  const Value at_zero =
      Select(Compare(Reinterpret(x), Constant(0, IntType(x)), "LT"), infinity, Neg(infinity));
  return Select(IsEqualTo(x, 0), at_zero, Unary("chlo.digamma", x));
}

// trigamma (polygamma(1, x)) as the CPU computes it: reflection below 1/2, six steps of the
// recurrence, then the asymptotic series. (chlo.polygamma is wrong for negative x.)
Value Trigamma(const Value& input) {
  const DType t = input.dtype();
  const Value reflect = Compare(input, Constant(0.5, t), "LT");
  const Value sin_pi_x = Unary("stablehlo.sine", Mul(Constant(M_PI, t), input));
  Value result = Select(reflect, Neg(Div(Constant(M_PI * M_PI, t), Mul(sin_pi_x, sin_pi_x))),
                        Constant(0, t, input.shape()));
  Value x = Select(reflect, Sub(One(t), input), input);
  for (int i = 0; i < 6; ++i) {
    result = Add(result, Div(One(t), Mul(x, x)));
    x = Add(x, One(t));
  }
  const Value ixx = Div(One(t), Mul(x, x));
  Value series = Sub(Constant(1.0 / 30, t), Mul(ixx, Constant(1.0 / 42, t)));
  series = Sub(Constant(1.0 / 6, t), Mul(ixx, series));
  series = Add(Add(One(t), Div(One(t), Mul(Constant(2, t), x))), Mul(ixx, series));
  result = Add(result, Div(series, x));
  return Select(reflect, Neg(result), result);
}
Value ErfInv(const Value& x) { return Unary("chlo.erf_inv", x); }
Value I1e(const Value& x) { return Unary("chlo.bessel_i1e", x); }
Value I1(const Value& x) { return Mul(I1e(x), Exp(Abs(x))); }

// i0(x) (scaled: i0e(x) = e^-|x| i0(x)), even in x. Up to kI0SeriesLimit the power series
// sum_k q^k / (k!)^2 in q = x^2 / 4, whose terms are all positive, so it is accurate to a few ulp.
// Above, the asymptotic expansion e^x / sqrt(2 pi x) * sum_k ((2k-1)!!)^2 / k! * (1/(8x))^k.
// Unscaled, e^x overflows where the CPU's does (i0 is inf from x ~ 88.7 on both). Both sums use
// Horner's rule: a running product of terms let XLA's CPU compiler fold the constant factors,
// which gave NaN in single-element programs.
constexpr double kI0SeriesLimit = 12;
constexpr int kI0SeriesTerms = 20;      // the last term is < 1e-9 of the sum at the limit
constexpr int kI0AsymptoticTerms = 12;  // likewise at the limit

// sum_k coefficients[k] y^k.
Value Polynomial(const std::vector<double>& coefficients, const Value& y) {
  const DType t = y.dtype();
  Value sum = Constant(coefficients.back(), t);
  for (size_t k = coefficients.size() - 1; k-- > 0;) {
    sum = Add(Mul(sum, y), Constant(coefficients[k], t));
  }
  return sum;
}

Value BesselI0(const Value& x, bool scaled) {
  const DType t = x.dtype();
  const Value a = Abs(x);
  // Series, evaluated at min(a, limit) so that the unused branch stays finite.
  std::vector<double> series_coefficients{1};
  for (int k = 1; k <= kI0SeriesTerms; ++k) {
    series_coefficients.push_back(series_coefficients.back() / (double(k) * k));
  }
  const Value s = Min(a, Constant(kI0SeriesLimit, t));
  Value series = Polynomial(series_coefficients, Mul(Mul(s, s), Constant(0.25, t)));
  if (scaled) series = Mul(series, Exp(Neg(s)));
  // Asymptotic expansion, at max(a, limit).
  std::vector<double> asymptotic_coefficients{1};
  for (int k = 1; k <= kI0AsymptoticTerms; ++k) {
    const double odd = 2.0 * k - 1;
    asymptotic_coefficients.push_back(asymptotic_coefficients.back() * odd * odd / k);
  }
  const Value l = Max(a, Constant(kI0SeriesLimit, t));
  const Value expansion = Polynomial(asymptotic_coefficients, Div(One(t), Mul(l, Constant(8, t))));
  Value asymptotic = Div(expansion, Sqrt(Mul(l, Constant(2 * M_PI, t))));
  if (!scaled) asymptotic = Mul(Exp(l), asymptotic);
  // NaN compares false: it takes the asymptotic branch, which keeps it NaN.
  return Select(Compare(a, Constant(kI0SeriesLimit, t), "LE"), series, asymptotic);
}
Value I0(const Value& x) { return BesselI0(x, false); }
Value I0e(const Value& x) { return BesselI0(x, true); }

// sin(pi x) / (pi x), 1 at 0, with pi x rounded once as on the CPU.
Value Sinc(const Value& x) {
  const DType t = x.dtype();
  const Value product = Mul(x, Constant(M_PI, t));
  return Select(IsEqualTo(x, 0), One(t), Div(Unary("stablehlo.sine", product), product));
}

using UnaryFn = Value (*)(const Value&);
struct UnaryOp {
  UnaryFn formula;
  // The CPU kernel's name when it is compiled for float and double only ("" for all floats).
  const char* float_or_double_kernel = "";
};

const std::unordered_map<std::string, UnaryOp>& UnaryOps() {
  static const std::unordered_map<std::string, UnaryOp> ops = {
      {"lgamma", {Lgamma}},
      {"digamma", {Digamma}},
      {"erfinv", {ErfInv}},
      {"i0", {I0}},
      {"special_i0e", {I0e}},
      {"special_i1", {I1}},
      {"special_i1e", {I1e}},
      {"sinc", {Sinc}},
      // The same functions as i0 and i1; the CPU evaluates them with Cephes' Chebyshev series.
      {"special_modified_bessel_i0", {I0, "modified_bessel_i0_cpu"}},
      {"special_modified_bessel_i1", {I1, "modified_bessel_i1_cpu"}},
  };
  return ops;
}

std::vector<Value> UnaryLowering(LoweringContext& ctx) {
  const UnaryOp& op = UnaryOps().at(ctx.name);
  const Value x = ctx.tensor(0);
  const DType out = ctx.output().dtype;
  if (*op.float_or_double_kernel != 0) CheckFloatOrDoubleKernel(op.float_or_double_kernel, out);
  return Result(ctx, op.formula(Convert(x, OpMathType(out))));
}

// polygamma(n, x) as the CPU: digamma for n = 0, trigamma for n = 1, and above
// (-1)^(n+1) n! zeta(n + 1, x), which is +-inf at the poles (x a non-positive integer).
std::vector<Value> PolygammaLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(1);
  const DType compute = OpMathType(ctx.output().dtype);
  const int64_t n = ctx.int_arg(0);
  if (n < 0) throw std::runtime_error("polygamma(n, x) does not support negative n.");
  const Value value = Convert(x, compute);
  if (n == 0) return Result(ctx, Digamma(value));
  if (n == 1) return Result(ctx, Trigamma(value));
  // n! as the CPU's exp(lgamma(n + 1)) (inf from n = 171 in double, 35 in float).
  const double factorial = std::exp(std::lgamma(static_cast<double>(n) + 1));
  const Value order = Constant(static_cast<double>(n) + 1, compute, value.shape());
  const Value scale = Constant(n % 2 == 1 ? factorial : -factorial, compute);
  return Result(ctx, Mul(scale, HurwitzZeta(order, value)));
}

// logit(x, eps): log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given (>= 0).
std::vector<Value> LogitLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  const DType compute = OpMathType(ctx.output().dtype);
  Value z = Convert(x, compute);
  if (ctx.has(1) && ctx.double_arg(1) >= 0) {
    const Scalar& eps = ctx.scalar(1);
    Scalar upper;
    upper.kind = Scalar::Kind::kFloat;
    upper.f = 1 - eps.ToDouble();
    const Value lo = ctx.ScalarParameter(eps, compute), hi = ctx.ScalarParameter(upper, compute);
    // Selects, not min/max: a NaN input must stay NaN.
    z = Select(Compare(z, lo, "LT"), lo, Select(Compare(z, hi, "GT"), hi, z));
  }
  return Result(ctx, Log(Div(z, Sub(One(compute), z))));
}

// logit_backward(grad, x, eps): grad / (x (1 - x)); outside [eps, 1 - eps] 0 when eps >= 0, NaN
// outside [0, 1] otherwise; grad * inf at 0 and 1.
std::vector<Value> LogitBackwardLowering(LoweringContext& ctx) {
  const DType compute = OpMathType(ctx.output().dtype);
  const Value grad = Convert(ctx.tensor(0), compute);
  const Value x = Convert(ctx.tensor(1), compute);
  const bool has_eps = ctx.has(2) && ctx.double_arg(2) >= 0;
  Value lo = Constant(0, compute), hi = One(compute), outside = Constant(NAN, compute);
  if (has_eps) {
    Scalar upper;
    upper.kind = Scalar::Kind::kFloat;
    upper.f = 1 - ctx.double_arg(2);
    lo = ctx.ScalarParameter(ctx.scalar(2), compute);
    hi = ctx.ScalarParameter(upper, compute);
    outside = Constant(0, compute);
  }
  const Value at_pole = Or(IsEqualTo(x, 0), IsEqualTo(x, 1));
  Value inside = Select(at_pole, Mul(grad, Constant(INFINITY, compute)),
                        Div(grad, Mul(x, Sub(One(compute), x))));
  const Value out_of_range = Or(Compare(x, lo, "LT"), Compare(x, hi, "GT"));
  return Result(ctx, Select(out_of_range, BroadcastTo(outside, inside.shape()), inside));
}

// ---- binary ops ----

// heaviside(x, values): values where x == 0, else x > 0 (NaN gives 0). Same dtypes (meta checks).
std::vector<Value> HeavisideLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  const Value x = ctx.value(0, t), values = ctx.value(1, t);
  const Value zero = Constant(0, t);
  const Shape shape = ctx.output().shape;
  const Value step = Convert(Compare(x, zero, "GT"), t);
  return Result(ctx, Select(BroadcastTo(Compare(x, zero, "EQ"), shape), BroadcastTo(values, shape),
                            BroadcastTo(step, shape)));
}

// nextafter(x, y) in the dtype itself, by stepping the bit pattern: away from zero when y lies
// beyond x in x's direction. From ±0 the result is the smallest subnormal with y's sign.
std::vector<Value> NextafterLowering(LoweringContext& ctx) {
  const DType t = ctx.promoted;
  CheckFloatingKernel("nextafter_cpu", t);
  const Shape shape = ctx.output().shape;
  const Value x = BroadcastTo(ctx.value(0, t), shape);
  const Value y = BroadcastTo(ctx.value(1, t), shape);
  const size_t bytes = ir::ByteSize(t);
  const DType bits_type = IntType(x);
  const Value x_bits = Reinterpret(x), y_bits = Reinterpret(y);
  // Bit patterns of the same sign order like their magnitudes.
  const Value away = Compare(Compare(x, y, "LT"), Compare(x, Constant(0, t), "GT"), "EQ");
  const Value one = Constant(1, bits_type);
  Value stepped = Select(away, Add(x_bits, one), Sub(x_bits, one));
  // From zero: the sign bit of y over the pattern 1.
  const Value sign_mask = Constant(
      static_cast<double>(std::numeric_limits<int64_t>::min() >> (64 - 8 * bytes)), bits_type);
  const Value from_zero = Or(And(y_bits, sign_mask), one);
  stepped = Select(IsEqualTo(x, 0), from_zero, stepped);
  Value result = ir::MakeOp("stablehlo.bitcast_convert", {stepped}, TensorType{t, shape});
  result = Select(Compare(x, y, "EQ"), y, result);
  result = Select(IsNan(y), y, result);
  return Result(ctx, Select(IsNan(x), x, result));
}

// logaddexp(a, b) = m + log1p(exp(-|a - b|)), m = max(a, b); logaddexp2 in base 2. Equal
// infinities give themselves (their difference would be NaN); a NaN operand gives NaN (max alone
// could pick the other operand).
Value LogAddExp(const Value& a, const Value& b, bool base2) {
  const DType t = a.dtype();
  const Value m = Select(Compare(a, b, "GT"), a, b);
  const Value negative_distance = Neg(Abs(Sub(a, b)));
  Value correction;
  if (base2) {
    const Value power = Binary("stablehlo.power", Constant(2, t), negative_distance);
    correction = Mul(Unary("stablehlo.log_plus_one", power), Constant(1 / M_LN2, t));
  } else {
    correction = Unary("stablehlo.log_plus_one", Exp(negative_distance));
  }
  Value result = Add(m, correction);
  const Value equal_infinities = And(Compare(a, b, "EQ"), IsEqualTo(Abs(a), INFINITY));
  result = Select(equal_infinities, BroadcastTo(a, result.shape()), result);
  result = Select(IsNan(b), BroadcastTo(b, result.shape()), result);
  return Select(IsNan(a), BroadcastTo(a, result.shape()), result);
}

// Complex logaddexp as the CPU's _log_add_exp_helper: with min/max the operands ordered by real
// part, log1p(exp(min - max)) + max; a NaN part anywhere gives NaN + NaN i; equal infinite real
// parts give min at -inf and, at +inf, log(exp(min) + exp(max)).
Value ComplexLogAddExp(const Value& x, const Value& y) {
  const Shape shape = BroadcastShapes(x.shape(), y.shape());
  const Value a = BroadcastTo(x, shape), b = BroadcastTo(y, shape);
  const Value a_first = Compare(Real(a), Real(b), "LT");
  const Value min = Select(a_first, a, b), max = Select(a_first, b, a);
  const Value min_real = Real(min), max_real = Real(max);
  const Value inf = ConstantLike(INFINITY, min_real);
  Value result = Add(Unary("stablehlo.log_plus_one", Exp(Sub(min, max))), max);
  // At +inf: each exp as C's cexp, inf cis(y) (with an exact 0 imaginary part at y = 0), and the
  // angle of their sum (atan2 of the infinities).
  auto exp_at_infinity = [&](const Value& y) {
    const Value imag = Select(Compare(y, ConstantLike(0, y), "EQ"), ConstantLike(0, y),
                              Mul(inf, Unary("stablehlo.sine", y)));
    return std::pair<Value, Value>{Mul(inf, Unary("stablehlo.cosine", y)), imag};
  };
  const auto [min_cos, min_sin] = exp_at_infinity(Imag(min));
  const auto [max_cos, max_sin] = exp_at_infinity(Imag(max));
  const Value angle = Binary("stablehlo.atan2", Add(min_sin, max_sin), Add(min_cos, max_cos));
  const Value equal_infinities =
      And(Compare(min_real, max_real, "EQ"), Compare(Abs(min_real), inf, "EQ"));
  const Value both_infinite = Select(Compare(min_real, inf, "EQ"), MakeComplex(inf, angle), min);
  result = Select(equal_infinities, both_infinite, result);
  const Value any_nan = Or(Or(IsNan(Real(a)), IsNan(Imag(a))), Or(IsNan(Real(b)), IsNan(Imag(b))));
  const Value nan = ConstantLike(NAN, min_real);
  return Select(any_nan, MakeComplex(nan, nan), result);
}

std::vector<Value> LogAddExpLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  if (ctx.name == "logaddexp" && ir::IsComplex(common)) {
    return Result(ctx, ComplexLogAddExp(ctx.value(0, common), ctx.value(1, common)));
  }
  CheckFloatingKernel(ctx.name + "_cpu", common);
  const DType t = OpMathType(common);
  const Value a = Convert(ctx.value(0, common), t), b = Convert(ctx.value(1, common), t);
  return Result(ctx, LogAddExp(a, b, ctx.name == "logaddexp2"));
}

// Complex logcumsumexp as the CPU's loop, one position at a time: acc = logaddexp(acc, x[i]) from
// -inf. A tree scan would combine in another order, and its principal-branch imaginary parts can
// then differ from the CPU's by 2 pi.
Value SequentialComplexLogCumSumExp(const Value& x, int64_t dim) {
  Shape slice = x.shape();
  slice[dim] = 1;
  Value start = Constant(-INFINITY, DType::kC64, slice);
  auto step = [&](const Value& i, const std::vector<Value>& v) {
    // Regions see only carried values: the input rides along.
    Value acc = ComplexLogAddExp(v[1], DynamicSliceAt(v[2], dim, i, 1));
    return std::vector<Value>{DynamicUpdateSliceAt(v[0], acc, dim, i), acc, v[2]};
  };
  return ForLoop(x.shape()[dim], {x, start, x}, step)[0];
}

// logcumsumexp(self, dim): the running logaddexp (associative), floating only; f16/bf16 in f32.
// Positions before the start read -inf, logaddexp's identity.
std::vector<Value> LogCumSumExpLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  if (ir::IsComplex(x.dtype())) {
    if (x.rank() == 0) return Result(ctx, x);
    return Result(ctx, SequentialComplexLogCumSumExp(x, NormalizeDim(ctx.int_arg(1), x.rank())));
  }
  CheckFloatingKernel("logcumsumexp_out_cpu", x.dtype());  // the CPU's message
  const Value input = Convert(x, OpMathType(x.dtype()));
  if (input.rank() == 0) return Result(ctx, input);
  auto combine = [](const std::vector<Value>& earlier, const std::vector<Value>& later) {
    return std::vector<Value>{LogAddExp(earlier[0], later[0], /*base2=*/false)};
  };
  const int64_t dim = NormalizeDim(ctx.int_arg(1), x.rank());
  return Result(ctx, InclusiveScan({input}, dim, {Constant(-INFINITY, input.dtype())}, combine)[0]);
}

const bool registered = [] {
  for (const auto& entry : UnaryOps()) RegisterLowering(entry.first, UnaryLowering);
  return true;
}();

LoweringRegistrar registrar({
    {"polygamma", PolygammaLowering},
    {"logit", LogitLowering},
    {"logit_backward", LogitBackwardLowering},
    {"heaviside", HeavisideLowering},
    {"nextafter", NextafterLowering},
    {"logaddexp", LogAddExpLowering},
    {"logaddexp2", LogAddExpLowering},
    {"logcumsumexp", LogCumSumExpLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
