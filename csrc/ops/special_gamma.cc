// igamma and igammac: the regularized lower and upper incomplete gamma functions P(a, x) and
// Q(a, x) = 1 - P(a, x), binary with type promotion (floating dtypes only, f16/bf16 in f32).
//
// As PyTorch's CPU kernel (ATen/native/Math.h, after Cephes and SciPy): the same edge values, the
// same prefactor x^a e^-x / Gamma(a) (Lanczos-scaled where x is near a), and the same choice among
// three expansions: the power series of P (DLMF 8.11.4), the continued fraction of Q (DLMF
// 8.9.2) and, for x <= 1.1, the series of Q (DLMF 8.7.3). The series and the continued fraction
// run inside the program, each as one stablehlo.while over all elements with the CPU's
// convergence test and its cap of 2000 iterations. Where a ~ x and a > 20 the CPU switches to a
// uniform asymptotic expansion (DLMF 8.12); here the series or the fraction continue there, which
// converge within the cap for a up to about 5e4 (f64) and 1e5 (f32).
#include <cmath>
#include <functional>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

constexpr int kMaxIterations = 2000;

Value C(double value, DType t) { return Constant(value, t); }
Value IsEqualTo(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "EQ"); }
Value IsLess(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "LT"); }
Value IsGreater(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "GT"); }
Value IsInf(const Value& x) { return IsEqualTo(Abs(x), INFINITY); }
Value Lgamma(const Value& x) { return Unary("chlo.lgamma", x); }
Value Log1p(const Value& x) { return Unary("stablehlo.log_plus_one", x); }

double MachineEpsilon(DType t) { return t == DType::kF64 ? 1.11022302462515654042e-16 : 0x1p-24; }

// Horner's rule, highest power first.
Value Polevl(const std::vector<double>& c, const Value& y) {
  Value sum = C(c.front(), y.dtype());
  for (size_t k = 1; k < c.size(); ++k) sum = Add(Mul(sum, y), C(c[k], y.dtype()));
  return sum;
}

// ---- the prefactor x^a e^-x / Gamma(a) ----

// Boost's Lanczos sum (g = 6.0247), scaled by e^g, as a rational function of a, evaluated in 1/a
// with the coefficients reversed above 1 (ratevl).
const std::vector<double> kLanczosNumerator = {
    0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
    19.51992788247617482847860966235652136208,    449.9445569063168119446858607650988409623,
    6955.999602515376140356310115515198987526,    75999.29304014542649875303443598909137092,
    601859.6171681098786670226533699352302507,    3481712.15498064590882071018964774556468,
    14605578.08768506808414169982791359218571,    43338889.32467613834773723740590533316085,
    86363131.28813859145546927288977868422342,    103794043.1163445451906271053616070238554,
    56906521.91347156388090791033559122686859};
const std::vector<double> kLanczosDenominator = {
    1.,        66.,        1925.,      32670.,     357423.,   2637558., 13339535.,
    45995730., 105258076., 150917976., 120543840., 39916800., 0.};
constexpr double kLanczosG = 6.024680040776729583740234375;

Value LanczosSumExpGScaled(const Value& a) {
  const DType t = a.dtype();
  const std::vector<double> numerator_reversed(kLanczosNumerator.rbegin(),
                                               kLanczosNumerator.rend());
  const std::vector<double> denominator_reversed(kLanczosDenominator.rbegin(),
                                                 kLanczosDenominator.rend());
  const Value inverse = Div(C(1, t), a);
  const Value above =
      Div(Polevl(numerator_reversed, inverse), Polevl(denominator_reversed, inverse));
  const Value below = Div(Polevl(kLanczosNumerator, a), Polevl(kLanczosDenominator, a));
  return Select(IsGreater(Abs(a), 1), above, below);
}

// x^a e^-x / Gamma(a): through lgamma where x is far from a (0 below e^-MAXLOG), else Lanczos'
// form, which keeps the large exponents from cancelling.
Value Prefactor(const Value& a, const Value& x) {
  const DType t = a.dtype();
  const double max_log = t == DType::kF64 ? 7.09782712893383996843e2 : 88.72283905206835;
  const Value log_ax = Sub(Sub(Mul(a, Log(x)), x), Lgamma(a));
  const Value direct = Select(IsLess(log_ax, -max_log), C(0, t), Exp(log_ax));
  const Value fac = Add(a, C(kLanczosG - 0.5, t));
  const Value scale = Div(Sqrt(Div(fac, C(M_E, t))), LanczosSumExpGScaled(a));
  const Value moderate =
      Mul(Exp(Sub(a, x)), Binary("stablehlo.power", Div(x, fac), a));  // a, x < 200
  const Value ratio = Div(Add(Sub(Sub(x, a), C(kLanczosG, t)), C(0.5, t)), fac);
  const Value large =
      Exp(Add(Mul(a, Sub(Log1p(ratio), ratio)), Div(Mul(x, C(0.5 - kLanczosG, t)), fac)));
  const Value both_small = And(IsLess(a, 200), IsLess(x, 200));
  const Value lanczos = Mul(scale, Select(both_small, moderate, large));
  return Select(Compare(Abs(Sub(a, x)), Mul(C(0.4, t), Abs(a)), "GT"), direct, lanczos);
}

// ---- a stablehlo.while over all elements ----

// Runs `step` on the carried element-wise state while any element is active, at most
// kMaxIterations times. The last carried value is the active mask; `step` returns the new state
// and whether each element has converged, and elements stop updating once converged. Regions may
// not capture outer values, so the inputs travel with the loop ahead of the state.
using StepFn = std::function<std::pair<std::vector<Value>, Value>(const std::vector<Value>& inputs,
                                                                  const std::vector<Value>& state)>;
std::vector<Value> WhileActive(const std::vector<Value>& inputs, const std::vector<Value>& state,
                               const Value& active, const StepFn& step) {
  const Shape& shape = active.shape();
  std::vector<int64_t> all_dims;
  for (size_t d = 0; d < shape.size(); ++d) all_dims.push_back(static_cast<int64_t>(d));
  std::vector<Value> initial{C(0, DType::kS64)};
  for (const Value& v : inputs) initial.push_back(BroadcastTo(v, shape));
  for (const Value& v : state) initial.push_back(BroadcastTo(v, shape));
  initial.push_back(active);
  std::vector<TensorType> types;
  for (const Value& v : initial) types.push_back(v.type());
  const size_t first_state = 1 + inputs.size();
  auto condition = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const Value any =
        Reduce(v.back(), all_dims, "stablehlo.or", ir::IntegerConstant(0, DType::kBool));
    return std::vector<Value>{And(any, Compare(v[0], C(kMaxIterations, DType::kS64), "LT"))};
  });
  auto body = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const std::vector<Value> in(v.begin() + 1, v.begin() + first_state);
    const std::vector<Value> old(v.begin() + first_state, v.end() - 1);
    auto [next, converged] = step(in, old);
    std::vector<Value> out{Add(v[0], C(1, DType::kS64))};
    out.insert(out.end(), in.begin(), in.end());
    for (size_t i = 0; i < old.size(); ++i) out.push_back(Select(v.back(), next[i], old[i]));
    out.push_back(And(v.back(), Not(converged)));
    return out;
  });
  std::vector<Value> results = ir::MakeMultiOp("stablehlo.while", initial, types, "",
                                               {std::move(condition), std::move(body)});
  return std::vector<Value>(results.begin() + first_state, results.end() - 1);
}

// ---- the three expansions ----

// P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)), for the elements of
// `active`.
Value LowerSeries(const Value& a, const Value& x, const Value& prefactor, const Value& active) {
  const DType t = a.dtype();
  const double eps = MachineEpsilon(t);
  auto step = [t, eps](const std::vector<Value>& in, const std::vector<Value>& s) {
    const Value r = Add(s[0], C(1, t));
    const Value c = Mul(s[1], Div(in[0], r));
    const Value sum = Add(s[2], c);
    return std::make_pair(std::vector<Value>{r, c, sum}, Compare(c, Mul(C(eps, t), sum), "LE"));
  };
  const std::vector<Value> state = WhileActive({x}, {a, C(1, t), C(1, t)}, active, step);
  return Select(IsEqualTo(prefactor, 0), C(0, t), Div(Mul(state[2], prefactor), a));
}

// Q(a, x) by the continued fraction, its convergents p_k / q_k rescaled when they grow past BIG.
Value UpperFraction(const Value& a, const Value& x, const Value& prefactor, const Value& active) {
  const DType t = a.dtype();
  const double eps = MachineEpsilon(t);
  const double big = t == DType::kF64 ? 4.503599627370496e15 : 16777216.;
  const double big_inverse = t == DType::kF64 ? 2.22044604925031308085e-16 : 0x1p-24;
  // State: c, y, z, p_{k-1}, p_{k-2}, q_{k-1}, q_{k-2}, answer.
  auto step = [=](const std::vector<Value>&, const std::vector<Value>& s) {
    const Value c = Add(s[0], C(1, t)), y = Add(s[1], C(1, t)), z = Add(s[2], C(2, t));
    const Value yc = Mul(y, c);
    const Value pk = Sub(Mul(s[3], z), Mul(s[4], yc)), qk = Sub(Mul(s[5], z), Mul(s[6], yc));
    const Value nonzero = Compare(qk, C(0, t), "NE");
    const Value r = Div(pk, qk);
    const Value change = Select(nonzero, Abs(Div(Sub(s[7], r), r)), Constant(1, t, r.shape()));
    const Value answer = Select(nonzero, r, s[7]);
    const Value rescale = IsGreater(Abs(pk), big);
    auto scaled = [&](const Value& v) { return Select(rescale, Mul(v, C(big_inverse, t)), v); };
    return std::make_pair(
        std::vector<Value>{c, y, z, scaled(pk), scaled(s[3]), scaled(qk), scaled(s[5]), answer},
        Compare(change, C(eps, t), "LE"));
  };
  const Value y = Sub(C(1, t), a), z = Add(Add(x, y), C(1, t));
  const Value p1 = Add(x, C(1, t)), q1 = Mul(z, x);
  const std::vector<Value> state =
      WhileActive({}, {C(0, t), y, z, p1, C(1, t), q1, x, Div(p1, q1)}, active, step);
  return Select(IsEqualTo(prefactor, 0), C(0, t), Mul(state[7], prefactor));
}

// Q(a, x) for x <= 1.1 without cancellation: -expm1(a log x - lgamma(a + 1)) - x^a / Gamma(a)
// sum_{n>=1} (-x)^n / (n! (a + n)). The terms fall below 1e-17 of the sum by n = 20.
Value UpperSeries(const Value& a, const Value& x) {
  const DType t = a.dtype();
  Value factor = Constant(1, t, x.shape()), sum = C(0, t);
  for (int n = 1; n <= 20; ++n) {
    factor = Mul(factor, Div(Neg(x), C(n, t)));
    sum = Add(sum, Div(factor, Add(a, C(n, t))));
  }
  const Value log_x = Log(x);
  const Value head =
      Neg(Unary("stablehlo.exponential_minus_one", Sub(Mul(a, log_x), Lgamma(Add(a, C(1, t))))));
  return Sub(head, Mul(Exp(Sub(Mul(a, log_x), Lgamma(a))), sum));
}

// ---- the functions ----

// P and Q as the CPU chooses among the expansions; a and x of one shape, both inside the domain
// (a, x > 0 and finite) wherever `valid`.
std::pair<Value, Value> Regularized(const Value& a, const Value& x, const Value& valid) {
  const DType t = a.dtype();
  const Value prefactor = Prefactor(a, x);
  const Value x_above_a = Compare(x, a, "GT");
  const Value lower_by_fraction = And(IsGreater(x, 1), x_above_a);
  const Value series_used = And(valid, Not(lower_by_fraction));
  const Value fraction_used = And(valid, And(IsGreater(x, 1.1), Not(Compare(x, a, "LT"))));
  const Value series = LowerSeries(a, x, prefactor, series_used);
  const Value fraction = UpperFraction(a, x, prefactor, fraction_used);
  // Q: 1 - P by the series where a is large enough for x, the fraction above 1.1, else Q's series.
  const Value bound = Select(IsGreater(x, 0.5), Mul(x, C(1.1, t)),
                             Div(C(-0.4, t), Log(x)));  // x <= 0.5: -0.4 / log x
  const Value by_series = Select(IsGreater(x, 1.1), Compare(x, a, "LT"), Compare(bound, a, "LT"));
  Value upper = Select(IsGreater(x, 1.1), fraction, UpperSeries(a, x));
  upper = Select(by_series, Sub(C(1, t), series), upper);
  const Value lower = Select(lower_by_fraction, Sub(C(1, t), upper), series);
  return {lower, upper};
}

// The CPU's boundary values, in its order (the first that holds wins): NaN for x < 0 or a < 0;
// at a = 0, P = 1 for x > 0 (else NaN); at x = 0, P = 0; for infinite a, P = 0 (NaN when x is
// infinite too); for infinite x, P = 1. Q mirrors them.
Value Boundaries(const Value& a, const Value& x, const Value& computed, bool upper) {
  const DType t = a.dtype();
  const Value nan = C(NAN, t), one = C(upper ? 0 : 1, t), zero = C(upper ? 1 : 0, t);
  Value result = Select(IsInf(x), one, computed);
  result = Select(IsInf(a), Select(IsInf(x), nan, zero), result);
  result = Select(IsEqualTo(x, 0), zero, result);
  result = Select(IsEqualTo(a, 0), Select(IsGreater(x, 0), one, nan), result);
  return Select(Or(IsLess(x, 0), IsLess(a, 0)), nan, result);
}

std::vector<Value> IgammaLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  CheckFloatingKernel(ctx.name + "_cpu", common);
  const DType t = OpMathType(common);
  const Shape& shape = ctx.output().shape;
  const Value a = BroadcastTo(Convert(ctx.value(0, common), t), shape);
  const Value x = BroadcastTo(Convert(ctx.value(1, common), t), shape);
  const Value valid = And(And(IsGreater(a, 0), IsGreater(x, 0)), Not(Or(IsInf(a), IsInf(x))));
  const auto [lower, upper] = Regularized(a, x, valid);
  const bool is_upper = ctx.name == "igammac";
  const Value result = Boundaries(a, x, is_upper ? upper : lower, is_upper);
  return {Convert(result, ctx.output().dtype)};
}

LoweringRegistrar registrar({
    {"igamma", IgammaLowering},
    {"igammac", IgammaLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
