// The remaining special functions of torch.special: xlog1py, entr, erfcx, log_ndtr, ndtri,
// spherical_bessel_j0, zeta, and the integer gcd and lcm.
//
// Each follows the formula and branches of PyTorch's CPU kernel (ATen/native/Math.h), so edge
// values (NaN, ±inf, poles, out-of-domain arguments) come out the same. Kernels the CPU compiles
// for float and double only (erfcx, log_ndtr, ndtri, zeta, spherical_bessel_j0) reject f16/bf16
// with the CPU's message; xlog1py and entr compute f16/bf16 in f32 and round once.
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

Value One(DType t) { return Constant(1, t); }
Value IsEqualTo(const Value& x, double value) {
  return Compare(x, Constant(value, x.dtype()), "EQ");
}
Value IsLess(const Value& x, double value) { return Compare(x, Constant(value, x.dtype()), "LT"); }
Value IsGreater(const Value& x, double value) {
  return Compare(x, Constant(value, x.dtype()), "GT");
}

std::vector<Value> Result(const LoweringContext& ctx, const Value& value) {
  return {BroadcastTo(Convert(value, ctx.output().dtype), ctx.output().shape)};
}

// The CPU kernel's name in its dtype-dispatch message: "special_erfcx" -> "erfcx_cpu".
std::string KernelName(const std::string& op) {
  const std::string prefix = "special_";
  const std::string base = op.rfind(prefix, 0) == 0 ? op.substr(prefix.size()) : op;
  return base + "_cpu";
}

// sum_k coefficients[k] y^k, highest power first (Cephes' polevl order).
Value Polevl(const std::vector<double>& coefficients, const Value& y) {
  Value sum = Constant(coefficients.front(), y.dtype());
  for (size_t k = 1; k < coefficients.size(); ++k) {
    sum = Add(Mul(sum, y), Constant(coefficients[k], y.dtype()));
  }
  return sum;
}

// ---- unary formulas (x in the compute dtype) ----

// -x log x, 0 at 0, -inf below 0.
Value Entr(const Value& x) {
  const DType t = x.dtype();
  Value result = Select(IsEqualTo(x, 0), Constant(0, t), Constant(-INFINITY, t));
  result = Select(IsGreater(x, 0), Neg(Mul(x, Log(x))), result);
  return Select(IsNan(x), x, result);
}

// erfcx(x) = e^(x^2) erfc(x) for x >= 0. Below kErfcxFractionStart the product is accurate (the
// exponent is small); above it Laplace's continued fraction 1/sqrt(pi) / (x + (1/2)/(x + 1/(x +
// (3/2)/(x + ...)))), evaluated from its tail. Measured against the CPU in double from x = 2:
// 20 terms are within 1.2e-9 relative, 60 within 7e-16.
constexpr double kErfcxFractionStart = 2;
Value ErfcxNonNegative(const Value& x) {
  const DType t = x.dtype();
  const int terms = t == DType::kF64 ? 60 : 20;
  const Value large = Max(x, Constant(kErfcxFractionStart, t));
  Value fraction = large;
  for (int k = terms; k > 0; --k) fraction = Add(large, Div(Constant(k / 2.0, t), fraction));
  const Value tail = Div(Constant(1 / std::sqrt(M_PI), t), fraction);
  const Value small = Min(x, Constant(kErfcxFractionStart, t));
  const Value product = Mul(Exp(Mul(small, small)), Unary("chlo.erfc", small));
  return Select(IsLess(x, kErfcxFractionStart), product, tail);
}

// Negative x by reflection, 2 e^(x^2) - erfcx(-x), as the CPU: erfcx(-x) is dropped below -6.1
// and the result is inf below -26.7.
Value Erfcx(const Value& x) {
  const DType t = x.dtype();
  const Value twice_exp = Mul(Constant(2, t), Exp(Mul(x, x)));
  Value negative = Select(IsLess(x, -6.1), twice_exp, Sub(twice_exp, ErfcxNonNegative(Neg(x))));
  negative = Select(IsLess(x, -26.7), Constant(INFINITY, t), negative);
  const Value result = Select(IsLess(x, 0), negative, ErfcxNonNegative(Abs(x)));
  return Select(IsNan(x), x, result);
}

// log Phi(x): log(erfcx(-t) / 2) - t^2 below -1 (t = x / sqrt 2), else log1p(-erfc(t) / 2).
Value LogNdtr(const Value& x) {
  const DType t = x.dtype();
  const Value scaled = Mul(x, Constant(M_SQRT1_2, t));
  const Value lower = Sub(Log(Div(Erfcx(Neg(scaled)), Constant(2, t))), Mul(scaled, scaled));
  const Value upper =
      Unary("stablehlo.log_plus_one", Neg(Div(Unary("chlo.erfc", scaled), Constant(2, t))));
  return Select(IsLess(x, -1), lower, upper);
}

// Cephes' ndtri rational approximations (PyTorch's coefficients, highest power first).
const std::vector<double> kNdtriP0 = {-5.99633501014107895267E1, 9.80010754185999661536E1,
                                      -5.66762857469070293439E1, 1.39312609387279679503E1,
                                      -1.23916583867381258016E0};
const std::vector<double> kNdtriQ0 = {
    1.00000000000000000000E0,  1.95448858338141759834E0,  4.67627912898881538453E0,
    8.63602421390890590575E1,  -2.25462687854119370527E2, 2.00260212380060660359E2,
    -8.20372256168333339912E1, 1.59056225126211695515E1,  -1.18331621121330003142E0};
const std::vector<double> kNdtriP1 = {
    4.05544892305962419923E0,   3.15251094599893866154E1,   5.71628192246421288162E1,
    4.40805073893200834700E1,   1.46849561928858024014E1,   2.18663306850790267539E0,
    -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
const std::vector<double> kNdtriQ1 = {
    1.00000000000000000000E0,   1.57799883256466749731E1,   4.53907635128879210584E1,
    4.13172038254672030440E1,   1.50425385692907503408E1,   2.50464946208309415979E0,
    -1.42182922854787788574E-1, -3.80806407691578277194E-2, -9.33259480895457427372E-4};
const std::vector<double> kNdtriP2 = {
    3.23774891776946035970E0,  6.91522889068984211695E0,  3.93881025292474443415E0,
    1.33303460815807542389E0,  2.01485389549179081538E-1, 1.23716634817820021358E-2,
    3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
const std::vector<double> kNdtriQ2 = {
    1.00000000000000000000E0,  6.02427039364742014255E0,  3.67983563856160859403E0,
    1.37702099489081330271E0,  2.16236993594496635890E-1, 1.34204006088543189037E-2,
    3.28014464682127739104E-4, 2.89247864745380683936E-6, 6.79019408009981274425E-9};
constexpr double kExpMinus2 = 0.13533528323661269189;

// The inverse of the normal CDF: a rational function of y - 1/2 in the middle, of 1/z with
// z = sqrt(-2 log y) in the tails (folded to y < exp(-2)).
Value Ndtri(const Value& y0) {
  const DType t = y0.dtype();
  const Value upper_tail = IsGreater(y0, 1 - kExpMinus2);
  const Value y = Select(upper_tail, Sub(One(t), y0), y0);
  // Middle: |y - 1/2| <= 3/8.
  const Value centred = Sub(y, Constant(0.5, t));
  const Value y2 = Mul(centred, centred);
  const Value ratio = Div(Mul(y2, Polevl(kNdtriP0, y2)), Polevl(kNdtriQ0, y2));
  const Value middle = Mul(Add(centred, Mul(centred, ratio)), Constant(2.50662827463100050242, t));
  // Tails.
  const Value z = Sqrt(Mul(Constant(-2, t), Log(y)));
  const Value x0 = Sub(z, Div(Log(z), z));
  const Value inverse = Div(One(t), z);
  const Value near = Div(Mul(inverse, Polevl(kNdtriP1, inverse)), Polevl(kNdtriQ1, inverse));
  const Value far = Div(Mul(inverse, Polevl(kNdtriP2, inverse)), Polevl(kNdtriQ2, inverse));
  const Value tail = Sub(x0, Select(IsLess(z, 8), near, far));
  Value result = Select(IsGreater(y, kExpMinus2), middle, Select(upper_tail, tail, Neg(tail)));
  result = Select(Or(IsLess(y0, 0), IsGreater(y0, 1)), Constant(NAN, t), result);
  result = Select(IsEqualTo(y0, 1), Constant(INFINITY, t), result);
  return Select(IsEqualTo(y0, 0), Constant(-INFINITY, t), result);
}

// sin(x) / x, by its Taylor series below |x| = 1/2; 0 at ±inf.
Value SphericalBesselJ0(const Value& x) {
  const DType t = x.dtype();
  const Value x2 = Mul(x, x);
  std::vector<double> series;  // 1/(2k+1)! with alternating signs, highest power first
  double factorial = 1;
  for (int k = 1; k <= 13; ++k) {
    factorial *= k;
    if (k % 2 == 1) series.insert(series.begin(), ((k / 2) % 2 == 0 ? 1 : -1) / factorial);
  }
  const Value small = Polevl(series, x2);
  const Value result = Select(IsLess(Abs(x), 0.5), small, Div(Unary("stablehlo.sine", x), x));
  return Select(IsEqualTo(Abs(x), INFINITY), Constant(0, t), result);
}

using UnaryFn = Value (*)(const Value&);
struct UnaryOp {
  UnaryFn formula;
  bool float_or_double_only;  // the CPU kernel is compiled for float and double only
};

const std::unordered_map<std::string, UnaryOp>& UnaryOps() {
  static const std::unordered_map<std::string, UnaryOp> ops = {
      {"special_entr", {Entr, false}},
      {"special_erfcx", {Erfcx, true}},
      {"special_log_ndtr", {LogNdtr, true}},
      {"special_ndtri", {Ndtri, true}},
      {"special_spherical_bessel_j0", {SphericalBesselJ0, true}},
  };
  return ops;
}

std::vector<Value> UnaryLowering(LoweringContext& ctx) {
  const UnaryOp& op = UnaryOps().at(ctx.name);
  const DType out = ctx.output().dtype;
  if (op.float_or_double_only) CheckFloatOrDoubleKernel(KernelName(ctx.name), out);
  return Result(ctx, op.formula(Convert(ctx.tensor(0), OpMathType(out))));
}

// ---- binary ops ----

// x log1p(y): NaN when y is NaN, else 0 where x == 0.
std::vector<Value> Xlog1pyLowering(LoweringContext& ctx) {
  const DType out = ctx.output().dtype;
  const DType t = OpMathType(out);
  const Value x = Convert(ctx.value(0, out), t), y = Convert(ctx.value(1, out), t);
  Value result =
      Select(IsEqualTo(x, 0), Constant(0, t), Mul(x, Unary("stablehlo.log_plus_one", y)));
  return Result(ctx, Select(IsNan(y), y, result));
}

Value Floor(const Value& x) { return Unary("stablehlo.floor", x); }

// Caps the loop below: for q below about -2^24 in f32, q + 1 == q and the CPU never returns.
constexpr int64_t kZetaShiftLimit = 1 << 16;

// For q < 0 (x an integer; other x give NaN) the CPU's Cephes loop sums (q + k)^-x directly,
// where chlo.zeta is off by orders of magnitude (its terms cancel inexactly). Done here the same
// way, in a stablehlo.while over all elements, with |q + k|^-x and the sign of an odd power,
// until q + k >= 1: the terms either side of 0 then cancel as on the CPU. Returns the partial sum
// and q + k, where chlo.zeta takes over.
std::pair<Value, Value> ShiftToPositive(const Value& x, const Value& q) {
  const DType t = q.dtype();
  const Value odd_power =
      Compare(Binary("stablehlo.remainder", x, Constant(2, t)), Constant(0, t), "NE");
  const Value shiftable = And(And(IsLess(q, 0), Compare(q, Floor(q), "NE")),
                              And(Compare(x, Floor(x), "EQ"), IsGreater(q, -INFINITY)));
  // Regions take no outer values: x and the parity travel in the state unchanged.
  std::vector<Value> initial{Select(shiftable, q, Constant(1, t, q.shape())),
                             Constant(0, t, q.shape()), Constant(0, DType::kS64), x, odd_power};
  std::vector<TensorType> types;
  for (const Value& v : initial) types.push_back(v.type());
  std::vector<int64_t> all_dims;
  for (size_t d = 0; d < q.shape().size(); ++d) all_dims.push_back(static_cast<int64_t>(d));
  auto condition = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const Value pending =
        Reduce(IsLess(v[0], 1), all_dims, "stablehlo.or", ir::IntegerConstant(0, DType::kBool));
    return std::vector<Value>{
        And(pending, Compare(v[2], Constant(kZetaShiftLimit, DType::kS64), "LT"))};
  });
  auto step = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const Value negative = IsLess(v[0], 1);
    Value term = Binary("stablehlo.power", Abs(v[0]), Neg(v[3]));
    term = Select(And(v[4], IsLess(v[0], 0)), Neg(term), term);
    return std::vector<Value>{Select(negative, Add(v[0], One(t)), v[0]),
                              Select(negative, Add(v[1], term), v[1]),
                              Add(v[2], Constant(1, DType::kS64)), v[3], v[4]};
  });
  const std::vector<Value> final_state = ir::MakeMultiOp("stablehlo.while", initial, types, "",
                                                         {std::move(condition), std::move(step)});
  return {Select(shiftable, final_state[0], q), final_state[1]};
}

}  // namespace

// Hurwitz zeta(x, q) through chlo.zeta, XLA's expansion of the same Cephes algorithm, with the
// CPU's early returns: inf at x == 1, NaN below; for q <= 0, inf at integer q and NaN where x is
// not an integer. Outside the anonymous namespace: polygamma (special.cc) uses it too.
Value HurwitzZeta(const Value& x, const Value& q) {
  const DType t = x.dtype();
  const Value inf = Constant(INFINITY, t), nan = Constant(NAN, t);
  const auto [shifted, partial_sum] = ShiftToPositive(x, q);
  Value result = Add(partial_sum, Binary("chlo.zeta", x, shifted));
  const Value non_positive_q = Not(IsGreater(q, 0));
  result = Select(And(And(non_positive_q, Compare(x, Floor(x), "NE")), Not(IsNan(q))), nan, result);
  result = Select(And(non_positive_q, Compare(q, Floor(q), "EQ")), inf, result);
  result = Select(IsLess(x, 1), nan, result);
  return Select(IsEqualTo(x, 1), inf, result);
}

namespace {

std::vector<Value> ZetaLowering(LoweringContext& ctx) {
  const DType out = ctx.output().dtype;
  CheckFloatOrDoubleKernel("zeta_cpu", out);
  const Shape& shape = ctx.output().shape;
  const Value x = BroadcastTo(ctx.value(0, out), shape), q = BroadcastTo(ctx.value(1, out), shape);
  return Result(ctx, HurwitzZeta(x, q));
}

// gcd by Euclid's algorithm on |a|, |b| in a stablehlo.while that runs until every element's
// divisor is 0 (at most ~92 steps for int64, the Fibonacci bound).
Value Gcd(const Value& a0, const Value& b0) {
  const Shape shape = BroadcastShapes(a0.shape(), b0.shape());
  const DType t = a0.dtype();
  std::vector<Value> initial{BroadcastTo(Abs(a0), shape), BroadcastTo(Abs(b0), shape)};
  const std::vector<TensorType> types{initial[0].type(), initial[1].type()};
  std::vector<int64_t> all_dims;
  for (size_t d = 0; d < shape.size(); ++d) all_dims.push_back(static_cast<int64_t>(d));
  auto condition = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const Value nonzero = Compare(v[0], Constant(0, t), "NE");
    return std::vector<Value>{
        Reduce(nonzero, all_dims, "stablehlo.or", ir::IntegerConstant(0, DType::kBool))};
  });
  auto step = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const Value &a = v[0], &b = v[1];
    const Value nonzero = Compare(a, Constant(0, t), "NE");
    const Value divisor = Select(nonzero, a, Constant(1, t));  // no remainder by zero
    return std::vector<Value>{
        Select(nonzero, Binary("stablehlo.remainder", b, divisor), Constant(0, t)),
        Select(nonzero, a, b)};
  });
  return ir::MakeMultiOp("stablehlo.while", initial, types, "",
                         {std::move(condition), std::move(step)})[1];
}

void CheckIntegerKernel(const std::string& kernel, DType t) {
  if (ir::IsFloating(t) || t == DType::kBool) {
    throw UnsupportedError("\"" + kernel + "\" not implemented for '" + ScalarTypeName(t) + "'");
  }
}

// gcd(a, b), and lcm(a, b) = |a / g * b| (0 when g is 0), in the promoted integer dtype. C++
// computes lcm's product of 8- and 16-bit types in int and truncates the result, so do we.
std::vector<Value> GcdLcmLowering(LoweringContext& ctx) {
  const DType t = ctx.promoted;
  CheckIntegerKernel(ctx.name + "_cpu", t);
  const Value a = ctx.value(0, t), b = ctx.value(1, t);
  const Value g = Gcd(a, b);
  if (ctx.name == "gcd") return Result(ctx, g);
  const DType wide = ir::ByteSize(t) < 4 ? DType::kS32 : t;
  const Value gw = Convert(g, wide);
  const Value zero = Compare(gw, Constant(0, wide), "EQ");
  const Value quotient =
      Div(BroadcastTo(Convert(a, wide), g.shape()), Select(zero, Constant(1, wide), gw));
  return Result(ctx, Select(zero, Constant(0, wide), Abs(Mul(quotient, Convert(b, wide)))));
}

const bool registered = [] {
  for (const auto& entry : UnaryOps()) RegisterLowering(entry.first, UnaryLowering);
  return true;
}();

LoweringRegistrar registrar({
    {"special_xlog1py", Xlog1pyLowering},
    {"special_zeta", ZetaLowering},
    {"gcd", GcdLcmLowering},
    {"lcm", GcdLcmLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
