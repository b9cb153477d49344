// The samplers of torch.distributions whose CPU kernels loop until a proposal is accepted
// (_standard_gamma, _sample_dirichlet, poisson, binomial) and the reparameterization gradients of
// Gamma and Dirichlet samples (_standard_gamma_grad, _dirichlet_grad).
//
// The samplers use the CPU kernels' algorithms (ATen/native/Distributions.{h,cpp}): for Gamma,
// Marsaglia and Tsang's squeeze and rejection, alpha < 1 boosted to alpha + 1 and scaled by
// U^(1/alpha); for Poisson, Hormann's transformed rejection (PTRS) from rate 10 and the product
// of uniforms (Knuth) below; for binomial, Hormann's BTRS where count * min(p, 1 - p) >= 10 and
// inversion (counting geometric gaps) below. The numbers drawn differ from the CPU's (another
// generator); the distributions do not. Each sampler is one stablehlo.while over all elements,
// flattened: every round draws fresh numbers for every element from the ThreeFry state the loop
// carries, an element keeps the value it accepts, and the loop ends once all have accepted, or
// after kMaxRounds rounds (an element still pending then is NaN; a valid parameter leaves one
// pending with a probability below 1e-100).
//
// Arithmetic runs in f32 for f16, bf16 and f32, in f64 for f64 (the CPU uses double throughout),
// with the acceptance tests written without the cancellation their textbook forms have in f32.
// The CPU kernels exist for float and double only, except poisson's; tpu takes f16 and bf16
// everywhere, as CUDA does for the samplers.
//
// The gradients follow the CPU's piecewise approximations (standard_gamma_grad_one,
// dirichlet_grad_one): the same branches, thresholds and published coefficients, in the same
// precision (double, except _dirichlet_grad's two series, which the CPU runs in the input's
// dtype), with a few terms rearranged where the textbook form cancels.
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/random_bits.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

constexpr int64_t kMaxRounds = 1000;

// ---- elementwise shorthands (operands of one float dtype; numbers broadcast as 0-d) ----

Value C(double value, DType t) { return Constant(value, t); }
Value Lt(const Value& a, const Value& b) { return Compare(a, b, "LT"); }
Value Le(const Value& a, const Value& b) { return Compare(a, b, "LE"); }
Value Lt(const Value& a, double b) { return Lt(a, C(b, a.dtype())); }
Value Gt(const Value& a, double b) { return Compare(a, C(b, a.dtype()), "GT"); }
Value Ge(const Value& a, double b) { return Compare(a, C(b, a.dtype()), "GE"); }
Value Le(const Value& a, double b) { return Le(a, C(b, a.dtype())); }
Value Eq(const Value& a, double b) { return Compare(a, C(b, a.dtype()), "EQ"); }
Value Plus(const Value& a, double b) { return Add(a, C(b, a.dtype())); }
Value Times(double a, const Value& b) { return Mul(C(a, b.dtype()), b); }
Value Minus(double a, const Value& b) { return Sub(C(a, b.dtype()), b); }
Value Over(double a, const Value& b) { return Div(C(a, b.dtype()), b); }
Value Log1p(const Value& x) { return Unary("stablehlo.log_plus_one", x); }
Value Floor(const Value& x) { return Unary("stablehlo.floor", x); }
Value Pow(const Value& x, const Value& y) { return Binary("stablehlo.power", x, y); }
// log and pow of x's dtype as the CPU's (glibc's) float functions: correctly rounded, from f64.
Value RoundedLog(const Value& x) { return Convert(Log(Convert(x, DType::kF64)), x.dtype()); }
Value RoundedPow(const Value& x, const Value& y) {
  return Convert(Pow(Convert(x, DType::kF64), Convert(y, DType::kF64)), x.dtype());
}
Value IsFinite(const Value& x) { return Lt(Abs(x), INFINITY); }
Value NanWhere(const Value& condition, const Value& x) {
  return Select(condition, C(NAN, x.dtype()), x);
}
Value ZeroWhereNan(const Value& x) { return Select(IsNan(x), C(0, x.dtype()), x); }
Value Bools(bool value, int64_t n) {
  return BroadcastTo(ir::IntegerConstant(value ? 1 : 0, DType::kBool), {n});
}

// The CPU's digamma_one<scalar_t, double> (Cephes) for x of dtype scalar_t: x is pushed to 10 or
// more by the recurrence and the asymptotic series taken there, the steps in x's dtype (log x, 1 /
// x and 0.5 / x too), the sum in double, rounded to x's dtype. +inf at 0 and the negative integers;
// other negative x, which no valid argument of these gradients reaches, by chlo's digamma.
Value Digamma(const Value& input) {
  static constexpr double kAsymptotic[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                                           7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                           3.96825396825396825397E-3, -8.33333333333333333333E-3,
                                           8.33333333333333333333E-2};
  constexpr double kDigammaOf10 = 2.25175258906672110764;
  const DType t = input.dtype();
  auto wide = [](const Value& v) { return Convert(v, DType::kF64); };
  Value x = input, shift = Constant(0, DType::kF64, input.shape());
  for (int step = 0; step < 10; ++step) {  // 10 steps take any x > 0 to 10 or more
    const Value below = Lt(x, 10);
    shift = Select(below, Sub(shift, wide(Over(1, x))), shift);
    x = Select(below, Plus(x, 1), x);
  }
  const Value z = Over(1, wide(Mul(x, x)));
  Value series = C(kAsymptotic[0], DType::kF64);
  for (size_t k = 1; k < std::size(kAsymptotic); ++k) series = Plus(Mul(series, z), kAsymptotic[k]);
  const Value tail = Select(Lt(x, 1e17f), Mul(z, series), C(0, DType::kF64));
  const Value log_x = wide(RoundedLog(x));
  Value sum = Sub(Sub(Add(shift, log_x), wide(Over(0.5, x))), tail);
  sum = Select(Eq(x, 10), Plus(shift, kDigammaOf10), sum);
  const Value pole = And(Le(input, 0), Compare(input, Floor(input), "EQ"));
  const Value negative = Convert(Unary("chlo.digamma", wide(input)), t);
  return Select(pole, C(INFINITY, t), Select(Lt(input, 0), negative, Convert(sum, t)));
}

// The CPU's std::max(low, x): low also where x is NaN.
Value AtLeast(const Value& x, double low) {
  const Value bound = C(low, x.dtype());
  return Select(Lt(bound, x), x, bound);
}

// The smallest normal value of a float dtype (std::numeric_limits::min) and the largest below 1.
double SmallestNormal(DType dtype) {
  return std::ldexp(1.0, dtype == DType::kF16 ? -14 : dtype == DType::kF64 ? -1022 : -126);
}
double LargestBelowOne(DType dtype) {
  const int digits = dtype == DType::kF16    ? 11
                     : dtype == DType::kBF16 ? 8
                     : dtype == DType::kF64  ? 53
                                             : 24;
  return 1 - std::ldexp(1.0, -digits);
}

// ---- the rejection loop ----

// One round of a sampler for every element: the state after its draws, the values it proposes
// (one per carried value) and where they are accepted.
struct Round {
  Value state;
  std::vector<Value> values;
  Value accepted;
};
using RoundFn = std::function<Round(const Value& state, const std::vector<Value>& inputs,
                                    const std::vector<Value>& values)>;

struct Finished {
  std::vector<Value> values;
  Value done;
};

// Runs `round` while an element is not done (at most kMaxRounds times). An element done before a
// round keeps its values; `inputs` are fixed per-element values the rounds read (regions see only
// what the loop carries).
Finished UntilDone(const Value& state, const std::vector<Value>& inputs,
                   const std::vector<Value>& values, const Value& done, const RoundFn& round) {
  std::vector<Value> initial{S32(0), state};
  initial.insert(initial.end(), inputs.begin(), inputs.end());
  initial.insert(initial.end(), values.begin(), values.end());
  initial.push_back(done);
  const auto first_value = static_cast<std::ptrdiff_t>(2 + inputs.size());
  auto condition = [](const std::vector<Value>& a) {
    return And(Compare(a[0], S32(kMaxRounds), "LT"), AnyOf(Not(a.back())));
  };
  auto body = [&](const std::vector<Value>& a) {
    const std::vector<Value> in(a.begin() + 2, a.begin() + first_value);
    const std::vector<Value> old(a.begin() + first_value, a.end() - 1);
    const Value& was_done = a.back();
    Round next = round(a[1], in, old);
    std::vector<Value> carried{Add(a[0], S32(1)), next.state};
    carried.insert(carried.end(), in.begin(), in.end());
    for (size_t i = 0; i < old.size(); ++i) {
      carried.push_back(Select(was_done, old[i], next.values[i]));
    }
    carried.push_back(Or(was_done, next.accepted));
    return carried;
  };
  std::vector<Value> results = While(initial, condition, body);
  return {std::vector<Value>(results.begin() + first_value, results.end() - 1), results.back()};
}

// ---- Gamma ----

// Gamma(alpha) for every element of the 1-D `alpha` (f32 or f64) as exp(log_boost) * boosted:
// `boosted` is Marsaglia and Tsang's sample of Gamma(alpha), or of Gamma(alpha + 1) where
// alpha < 1, where log_boost = log(U^(1/alpha)) (0 elsewhere). Where the method is undefined
// (alpha NaN or <= -2/3) the CPU's loop accepts NaN at once, and so does this one.
struct GammaSample {
  Value log_boost;
  Value boosted;
};
GammaSample DrawGamma(const Value& state, const Value& alpha) {
  const DType t = alpha.dtype();
  const Value below_one = Lt(alpha, 1);
  const RandomDraw boost = DrawUniform(state, alpha.shape(), t);
  const Value log_boost = Select(below_one, Div(Log1p(Neg(boost.values)), alpha), C(0, t));
  // The CPU's constants are floats: 1.0f / 3.0f, 0.0331f.
  const Value d = Sub(Select(below_one, Plus(alpha, 1), alpha), C(1.0f / 3.0f, t));
  const Value c = Over(1, Sqrt(Times(9, d)));
  auto round = [t](const Value& s, const std::vector<Value>& in, const std::vector<Value>&) {
    const Value &shift = in[0], &slope = in[1];  // d and c
    const RandomDraw normal = DrawNormal(s, shift.shape(), t);
    const RandomDraw uniform = DrawUniform(normal.state, shift.shape(), t);
    const Value& x = normal.values;
    const Value y = Plus(Mul(slope, x), 1);
    const Value v = Mul(Mul(y, y), y);
    const Value u = Minus(1, uniform.values);
    const Value xx = Mul(x, x);
    const Value squeeze = Lt(u, Minus(1, Times(0.0331f, Mul(xx, xx))));
    const Value exact = Lt(Log(u), Add(Times(0.5, xx), Mul(shift, Add(Minus(1, v), Log(v)))));
    // y <= 0 draws again (the CPU's inner loop); a NaN y does not, there either.
    const Value usable = Not(Le(y, 0));
    return Round{uniform.state, {Mul(shift, v)}, And(usable, Or(squeeze, exact))};
  };
  const int64_t n = alpha.shape()[0];
  const Finished f =
      UntilDone(boost.state, {d, c}, {ConstantLike(0, alpha)}, Bools(false, n), round);
  return {log_boost, NanWhere(Not(f.done), f.values[0])};
}

// The input as a 1-D value of the compute dtype.
Value Flat(const Value& x, DType t) { return Reshape(Convert(x, t), {ir::NumElements(x.shape())}); }

// A sampler's start: the CPU kernel's dtype check, then the result when there is nothing to draw.
std::optional<Value> CheckedEmpty(const TensorType& out, const std::string& kernel) {
  CheckFloatingKernel(kernel, out.dtype);
  if (ir::NumElements(out.shape) != 0) return std::nullopt;
  return Constant(0, out.dtype, out.shape);
}

std::vector<Value> LowerStandardGamma(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (auto empty = CheckedEmpty(out, "gamma_cpu")) return {*empty};
  const Value alpha = Flat(ctx.tensor(0), OpMathType(out.dtype));
  const GammaSample g = DrawGamma(InitialRandomState(ctx), alpha);
  // alpha == 0 gives 0 before any draw; the dtype's smallest normal bounds every sample.
  const Value sample = Select(Eq(alpha, 0), C(0, alpha.dtype()), Mul(Exp(g.log_boost), g.boosted));
  return {Reshape(AtLeast(Convert(sample, out.dtype), SmallestNormal(out.dtype)), out.shape)};
}

// Gamma samples normalized along the last dim. The CPU draws them in double, each at least
// DBL_MIN (also for alpha == 0 and NaN), so where a row's all underflow it is uniform; here they
// are drawn as logarithms, bounded below by log(DBL_MIN), which gives the same in any dtype.
std::vector<Value> LowerSampleDirichlet(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (auto empty = CheckedEmpty(out, "dirichlet")) return {*empty};
  const int64_t n = ir::NumElements(out.shape);
  const DType t = OpMathType(out.dtype);
  const Value alpha = Flat(ctx.tensor(0), t);
  const GammaSample g = DrawGamma(InitialRandomState(ctx), alpha);
  const double log_smallest = std::log(SmallestNormal(DType::kF64));
  Value log_gamma = Select(Eq(alpha, 0), C(-INFINITY, t), Add(g.log_boost, Log(g.boosted)));
  log_gamma = AtLeast(log_gamma, log_smallest);
  const int64_t k = out.shape.empty() ? 1 : out.shape.back();
  const Shape rows{n / k, k};
  log_gamma = Reshape(log_gamma, rows);
  const Value largest = Reduce(log_gamma, {1}, "stablehlo.maximum", C(log_smallest, t));
  const Value scaled = Exp(Sub(log_gamma, BroadcastInDim(largest, rows, {0})));
  const Value ratio = Div(scaled, BroadcastInDim(SumOver(scaled, {1}), rows, {0}));
  Value result = AtLeast(Convert(ratio, out.dtype), SmallestNormal(out.dtype));
  const Value below_one = C(LargestBelowOne(out.dtype), out.dtype);
  result = Select(Lt(result, below_one), result, below_one);
  return {Reshape(result, out.shape)};
}

// ---- Poisson and binomial ----

// log(k!) - ((k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2): a table below 10, Stirling's series
// above (the values and the series of the CPU's stirling_approx_tail).
Value StirlingTail(const Value& k) {
  static constexpr double kTable[] = {0.0810614667953272,  0.0413406959554092, 0.0276779256849983,
                                      0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                                      0.0118967099458917,  0.0104112652619720, 0.00925546218271273,
                                      0.00833056343336287};
  const DType t = k.dtype();
  const Value k1 = Plus(k, 1);
  const Value inverse_square = Over(1, Mul(k1, k1));
  Value tail = Div(Sub(C(1.0 / 12, t), Mul(Sub(C(1.0 / 360, t), Times(1.0 / 1260, inverse_square)),
                                           inverse_square)),
                   k1);
  for (int j = 0; j < 10; ++j) tail = Select(Eq(k, j), C(kTable[j], t), tail);
  return tail;
}

// log(rate^k e^-rate / k!) for k >= 0, as -rate + k + 1 - (k + 1/2) log((k + 1) / rate) - log(rate)
// / 2 - log(2 pi) / 2 - StirlingTail(k), whose large terms cancel before they are rounded.
Value LogPoissonMass(const Value& rate, const Value& k) {
  const Value excess = Sub(Plus(k, 1), rate);  // k + 1 - rate
  const Value spread = Mul(Plus(k, 0.5), Log1p(Div(excess, rate)));
  const Value log_norm = Add(Times(0.5, Log(rate)), C(0.5 * std::log(2 * M_PI), rate.dtype()));
  return Sub(Sub(Sub(excess, spread), log_norm), StirlingTail(k));
}

// A proposal of Hormann's PTRS for rate >= 10 from two uniforms: (k, accepted).
std::pair<Value, Value> PoissonProposal(const Value& rate, const Value& unit, const Value& v) {
  const Value b = Plus(Times(2.53, Sqrt(rate)), 0.931);
  const Value a = Plus(Times(0.02483, b), -0.059);
  const Value inverse_alpha = Plus(Div(C(1.1328, b.dtype()), Plus(b, -3.4)), 1.1239);
  const Value v_r = Minus(0.9277, Div(C(3.6224, b.dtype()), Plus(b, -2)));
  const Value u = Plus(unit, -0.5);
  const Value us = Minus(0.5, Abs(u));
  const Value k = Floor(Add(Mul(Add(Div(Times(2, a), us), b), u), Plus(rate, 0.43)));
  const Value fast = And(Ge(us, 0.07), Le(v, v_r));
  const Value rejected = Or(Lt(k, 0), And(Lt(us, 0.013), Lt(us, v)));
  const Value bound = Sub(Add(Log(v), Log(inverse_alpha)), Log(Add(Div(a, Mul(us, us)), b)));
  const Value accepted = Or(fast, And(Not(rejected), Le(bound, LogPoissonMass(rate, k))));
  return {k, accepted};
}

std::vector<Value> LowerPoisson(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (auto empty = CheckedEmpty(out, "poisson_cpu")) return {*empty};
  const DType t = OpMathType(out.dtype);
  const Value rate = Flat(ctx.tensor(0), t);
  // The CPU raises for a negative or NaN rate ("invalid Poisson rate"); those are NaN here.
  const Value invalid = Not(Ge(rate, 0));
  auto round = [t](const Value& s, const std::vector<Value>& in, const std::vector<Value>& values) {
    const Value &lambda = in[0], &exp_minus_lambda = in[1];
    const RandomDraw first = DrawUniform(s, lambda.shape(), t);
    const RandomDraw second = DrawUniform(first.state, lambda.shape(), t);
    const auto [k, accepted] = PoissonProposal(lambda, first.values, second.values);
    // Below 10: the number of uniforms whose running product stays above e^-rate.
    const Value product = Mul(values[1], first.values);
    const Value more = Lt(exp_minus_lambda, product);
    const Value large = Ge(lambda, 10);
    return Round{second.state,
                 {Select(large, k, Add(values[0], Convert(more, t))), product},
                 Select(large, accepted, Not(more))};
  };
  const Finished f = UntilDone(InitialRandomState(ctx), {rate, Exp(Neg(rate))},
                               {NanWhere(invalid, ConstantLike(0, rate)), ConstantLike(1, rate)},
                               Or(invalid, Eq(rate, 0)), round);
  return {Reshape(Convert(NanWhere(Not(f.done), f.values[0]), out.dtype), out.shape)};
}

// A proposal of Hormann's BTRS for count * p >= 10, p <= 1/2, from two uniforms: (k, accepted).
// The bound's logarithms of ratios near 1 are taken as log1p of their differences from 1.
std::pair<Value, Value> BinomialProposal(const Value& count, const Value& p, const Value& unit,
                                         const Value& v) {
  const Value q = Minus(1, p);
  const Value deviation = Sqrt(Mul(Mul(count, p), q));
  const Value b = Plus(Times(2.53, deviation), 1.15);
  const Value a = Add(Plus(Times(0.0248, b), -0.0873), Times(0.01, p));
  const Value c = Plus(Mul(count, p), 0.5);
  const Value v_r = Minus(0.92, Div(C(4.2, b.dtype()), b));
  const Value alpha = Mul(Plus(Div(C(5.1, b.dtype()), b), 2.83), deviation);
  const Value m = Floor(Mul(Plus(count, 1), p));
  const Value u = Plus(unit, -0.5);
  const Value us = Minus(0.5, Abs(u));
  const Value k = Floor(Add(Mul(Add(Div(Times(2, a), us), b), u), c));
  const Value in_range = Not(Or(Lt(k, 0), Lt(count, k)));
  const Value fast = And(Ge(us, 0.07), Le(v, v_r));
  const Value bound = Log(Div(Mul(v, alpha), Add(Div(a, Mul(us, us)), b)));
  const Value w = Mul(p, Plus(count, 2));
  const Value count_m1 = Plus(Sub(count, m), 1), count_k1 = Plus(Sub(count, k), 1);
  const Value at_mode = Mul(Plus(m, 0.5), Log1p(Div(Sub(Plus(m, 1), w), Mul(p, count_m1))));
  const Value between = Mul(Plus(count, 1), Log1p(Div(Sub(k, m), count_k1)));
  const Value at_k = Mul(Plus(k, 0.5), Log1p(Div(Sub(w, Plus(k, 1)), Mul(q, Plus(k, 1)))));
  const Value tails = Sub(Add(StirlingTail(m), StirlingTail(Sub(count, m))),
                          Add(StirlingTail(k), StirlingTail(Sub(count, k))));
  const Value upper = Add(Add(Add(at_mode, between), at_k), tails);
  return {k, And(in_range, Or(fast, Le(bound, upper)))};
}

std::vector<Value> LowerBinomial(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  if (auto empty = CheckedEmpty(out, "binomial_cpu")) return {*empty};
  const DType t = OpMathType(out.dtype);
  const Value count = Flat(BroadcastTo(ctx.tensor(0), out.shape), t);
  const Value prob = Flat(BroadcastTo(ctx.tensor(1), out.shape), t);
  // The CPU's cases before drawing: 0 for count <= 0 or prob <= 0, count for prob >= 1, NaN for
  // a NaN prob. Its loop never ends for a NaN or infinite count; that is NaN here.
  const Value none = Or(Le(count, 0), Le(prob, 0));
  const Value all = And(Not(none), Ge(prob, 1));
  const Value fixed = Or(Or(none, all), Or(IsNan(prob), Not(IsFinite(count))));
  const Value fixed_value = Select(none, C(0, t), NanWhere(Not(all), count));
  // Draws run with p <= 1/2 and count the failures where p > 1/2.
  const Value flipped = Gt(prob, 0.5);
  const Value p = Select(flipped, Minus(1, prob), prob);
  const Value rejection = Ge(Mul(count, p), 10);
  auto round = [t](const Value& s, const std::vector<Value>& in, const std::vector<Value>& values) {
    const Value &n = in[0], &q = in[1], &log_failure = in[2], &by_btrs = in[3];
    const RandomDraw first = DrawUniform(s, n.shape(), t);
    const RandomDraw second = DrawUniform(first.state, n.shape(), t);
    const auto [k, accepted] = BinomialProposal(n, q, first.values, second.values);
    // Inversion: the number of geometric gaps (trials to a success) that fit in the count.
    const Value gap = Unary("stablehlo.ceil", Div(Log(first.values), log_failure));
    const Value trials = Add(values[1], gap);
    const Value beyond = Lt(n, trials);
    return Round{second.state,
                 {Select(by_btrs, k, Add(values[0], Convert(Not(beyond), t))), trials},
                 Select(by_btrs, accepted, beyond)};
  };
  const Finished f = UntilDone(InitialRandomState(ctx), {count, p, Log1p(Neg(p)), rejection},
                               {ConstantLike(0, count), ConstantLike(0, count)}, fixed, round);
  const Value successes = Select(flipped, Sub(count, f.values[0]), f.values[0]);
  const Value result = Select(fixed, fixed_value, NanWhere(Not(f.done), successes));
  return {Reshape(Convert(result, out.dtype), out.shape)};
}

// ---- reparameterization gradients ----

// d sample / d alpha for a Gamma(alpha) sample x: the CPU's standard_gamma_grad_one.
Value StandardGammaGrad(const Value& alpha, const Value& x) {
  const DType t = alpha.dtype();
  // Small x: -(d/dalpha P(alpha, x)) / pdf from the series of P, its terms 0..5, as
  // x e^x (S2 - (log x - digamma(alpha)) S1) with S1 = sum t_i / (alpha + i) and S2 = sum t_i /
  // (alpha + i)^2. (The CPU's x^alpha / (x^(alpha-1) e^-x) is x e^x, which does not underflow.)
  // Their 1 / alpha^2 terms cancel; with digamma(alpha) = digamma(alpha + 1) - 1 / alpha that is
  // -sum_{i>0} i t_i / (alpha (alpha + i)^2) - (log x - digamma(alpha + 1)) S1 without them.
  Value term = ConstantLike(1, x), series = Div(term, alpha), reduced = ConstantLike(0, x);
  for (int i = 1; i <= 5; ++i) {
    term = Mul(term, Div(Neg(x), C(i, t)));
    const Value denominator = Plus(alpha, i);
    series = Add(series, Div(term, denominator));
    reduced = Add(reduced, Div(Times(i, term), Mul(denominator, denominator)));
  }
  const Value bracket =
      Neg(Add(Div(reduced, alpha), Mul(Sub(Log(x), Digamma(Plus(alpha, 1))), series)));
  Value small_x = ZeroWhereNan(Mul(Mul(x, Exp(x)), bracket));
  // The CPU's value at alpha = 0 (digamma(0) = inf): inf for x > 0.
  small_x = Select(And(Eq(alpha, 0), Gt(x, 0)), C(INFINITY, t), small_x);
  // Where x^alpha underflows in double (below 2^-1074) the CPU's quotient is 0 (or NaN, made 0).
  small_x = Select(Lt(Mul(alpha, Log(x)), -1074 * M_LN2), C(0, t), small_x);
  // Large alpha: Rice's saddle point expansion, with its own form within 10% of alpha.
  const Value near_numerator = Plus(Times(24, Mul(alpha, Plus(Times(12, alpha), 1))), 1);
  const Value near_second =
      Add(Add(Times(1440, Mul(alpha, alpha)), Times(6, Mul(x, Minus(53, Times(120, x))))),
          Sub(Mul(alpha, Plus(Times(3600, x), 107)), Div(Times(65, Mul(x, x)), alpha)));
  const Value alpha_squared = Mul(alpha, alpha);
  const Value near =
      Div(Mul(Div(near_numerator, alpha_squared), Div(near_second, alpha_squared)), C(1244160, t));
  const Value difference = Sub(alpha, x);
  const Value log_ratio = Log1p(Div(Neg(difference), alpha));  // log(x / alpha)
  const Value root = Sqrt(Times(8, alpha));
  const Value term2 = Div(root, difference);
  const Value term3 = Pow(Sub(Neg(difference), Mul(alpha, log_ratio)), C(-1.5, t));
  const Value term23 = Select(Lt(x, alpha), Sub(term2, term3), Add(term2, term3));
  const Value term1 = Sub(Mul(log_ratio, term23), Div(Mul(Sqrt(Over(2, alpha)), Add(alpha, x)),
                                                      Mul(difference, difference)));
  const Value stirling =
      Plus(Mul(Over(1, Times(12, alpha)), Plus(Over(1, Times(24, alpha)), 1)), 1);
  const Value far = Neg(Div(Mul(stirling, Mul(x, term1)), root));
  const Value within = And(Le(Times(0.9f, alpha), x), Le(x, Times(1.1f, alpha)));
  const Value large_alpha = Select(within, near, far);
  // Otherwise: a bivariate rational fit in log(x / alpha) and log(alpha).
  static constexpr double kFit[3][8] = {
      {0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089,
       0.0014179084},
      {0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
       -0.00058392623},
      {0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326,
       0.00085092367, -1.5247877e-07}};
  const Value u = Log(Div(x, alpha)), v = Log(alpha);
  std::vector<Value> in_v;
  for (int i = 0; i < 8; ++i) {
    in_v.push_back(Plus(Mul(u, Plus(Times(kFit[2][i], u), kFit[1][i])), kFit[0][i]));
  }
  auto cubic = [&](int first) {
    return Add(in_v[first],
               Mul(v, Add(in_v[first + 1], Mul(v, Add(in_v[first + 2], Mul(v, in_v[first + 3]))))));
  };
  const Value fit = Exp(Div(cubic(0), cubic(4)));
  return Select(Lt(x, 0.8f), small_x, Select(Gt(alpha, 8), large_alpha, fit));
}

std::vector<Value> LowerStandardGammaGrad(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel("_standard_gamma_grad_cpu", out.dtype);
  // In double for every dtype, as the CPU (whose accumulate type here is double).
  const Value alpha = BroadcastTo(ctx.value(0, DType::kF64), out.shape);
  const Value x = BroadcastTo(ctx.value(1, DType::kF64), out.shape);
  return {Convert(StandardGammaGrad(alpha, x), out.dtype)};
}

// The gradient of a Beta(alpha, beta) sample x near 0 with respect to alpha (a series in x).
Value BetaGradAlphaSmall(const Value& x, const Value& alpha, const Value& beta) {
  const DType t = x.dtype();
  const Value factor = Sub(Sub(Digamma(alpha), Digamma(Add(alpha, beta))), RoundedLog(x));
  Value term = ConstantLike(1, x);
  Value series = Mul(Div(term, alpha), Add(factor, Over(1, alpha)));
  for (int i = 1; i <= 10; ++i) {
    term = Mul(term, Div(Mul(Minus(i, beta), x), C(i, t)));
    const Value denominator = Plus(alpha, i);
    series = Add(series, Mul(Div(term, denominator), Add(factor, Over(1, denominator))));
  }
  return ZeroWhereNan(Mul(Mul(x, RoundedPow(Minus(1, x), Neg(beta))), series));
}

// The gradient of a Beta(alpha, beta) sample x near 0 with respect to beta.
Value BetaGradBetaSmall(const Value& x, const Value& alpha, const Value& beta) {
  const DType t = x.dtype();
  const Value factor = Sub(Digamma(Add(alpha, beta)), Digamma(beta));
  Value term = ConstantLike(1, x), betas = ConstantLike(1, x),
        betas_derivative = ConstantLike(0, x);
  Value series = Div(factor, alpha);
  for (int i = 1; i <= 8; ++i) {
    term = Mul(term, Div(Neg(x), C(i, t)));
    const Value beta_i = Plus(beta, -i);
    betas_derivative = Add(Mul(betas_derivative, beta_i), betas);
    betas = Mul(betas, beta_i);
    series = Add(series, Mul(Div(term, Plus(alpha, i)), Add(betas_derivative, Mul(factor, betas))));
  }
  return ZeroWhereNan(Neg(Mul(RoundedPow(Minus(1, x), Minus(1, beta)), series)));
}

// log1p(y) - y without cancellation: for |y| < 1/4 from the series of log1p(y) = 2 atanh(s),
// s = y / (2 + y), as -2 s^2 / (1 - s) + 2 sum_{k>0} s^(2k+1) / (2k+1) (|s| < 1/7, so twelve
// terms reach double precision); above, directly (it loses at most a factor 10 there).
Value Log1pMinusIdentity(const Value& y) {
  const Value s = Div(y, Plus(y, 2));
  const Value s2 = Mul(s, s);
  Value power = s, sum = ConstantLike(0, y);
  for (int k = 1; k <= 12; ++k) {
    power = Mul(power, s2);
    sum = Add(sum, Div(power, C(2 * k + 1, y.dtype())));
  }
  const Value series = Add(Neg(Div(Times(2, s2), Minus(1, s))), Times(2, sum));
  return Select(Lt(Abs(y), 0.25), series, Sub(Log1p(y), y));
}

// The gradient with respect to alpha where alpha and beta are both large (Rice's saddle point
// expansion; a polynomial form within a tenth of a standard deviation of the mean).
Value BetaGradAlphaMid(const Value& x, const Value& alpha, const Value& beta) {
  const Value total = Add(alpha, beta);
  const Value mean = Div(alpha, total);
  const Value deviation = Div(Sqrt(Div(Mul(alpha, beta), Plus(total, 1))), total);
  const Value beta2 = Mul(beta, beta);
  const Value one_minus_x = Minus(1, x);
  Value poly = Mul(Times(8, one_minus_x), Plus(Times(135, beta), -11));
  poly = Add(Mul(Sub(Plus(Times(1620, Mul(beta, one_minus_x)), 453), Times(455, x)), beta),
             Mul(alpha, poly));
  poly = Add(Times(3, Mul(Sub(Plus(Times(180, beta), 59), Times(90, x)), beta2)), Mul(alpha, poly));
  poly = Add(Mul(Mul(Plus(Times(20, Mul(Plus(Times(27, beta), 16), x)), 43), beta2), beta),
             Mul(alpha, poly));
  poly = Add(Times(47, Mul(Mul(x, beta2), beta2)), Mul(alpha, poly));
  const Value scale =
      Div(Mul(Plus(Times(12, alpha), 1), Plus(Times(12, beta), 1)), Mul(total, total));
  const Value cubed = Mul(Mul(alpha, alpha), alpha);
  const Value denominator = Mul(Times(12960, Mul(cubed, beta2)), Plus(Times(12, total), 1));
  const Value near = Div(Mul(Div(scale, one_minus_x), poly), denominator);

  auto stirling = [](const Value& y) {
    return Plus(Add(Over(1, Times(12, y)), Over(1, Times(288, Mul(y, y)))), 1);
  };
  const Value prefactor = Neg(Div(x, Sqrt(Div(Times(2, Mul(alpha, beta)), total))));
  const Value correction = Div(Mul(stirling(alpha), stirling(beta)), stirling(total));
  const Value x_minus_1 = Plus(x, -1);
  const Value term1_numerator =
      Sub(Add(Times(2, Mul(Mul(alpha, alpha), x_minus_1)), Mul(Mul(alpha, beta), x_minus_1)),
          Mul(x, beta2));
  const Value axbx = Add(Mul(alpha, x_minus_1), Mul(beta, x));
  const Value term1_denominator = Mul(
      Mul(Sqrt(Div(Times(2, alpha), beta)), Pow(total, C(1.5, total.dtype()))), Mul(axbx, axbx));
  const Value term1 = Div(term1_numerator, term1_denominator);
  // log(alpha / (total x)) and beta log(beta / (total (1 - x))) + alpha log(alpha / (total x)),
  // whose first-order terms in x - mean cancel: taken as -alpha g(d / mean) - beta
  // g(-d / (1 - mean)) with g(y) = log1p(y) - y, d = x - mean.
  const Value d = Sub(x, mean);
  const Value term2 = Times(-0.5, Log1p(Div(d, mean)));
  const Value term3 = Div(Sqrt(Div(Times(8, Mul(alpha, beta)), total)), axbx);
  const Value base = Neg(Add(Mul(alpha, Log1pMinusIdentity(Div(d, mean))),
                             Mul(beta, Log1pMinusIdentity(Div(Neg(d), Minus(1, mean))))));
  const Value term4 = Pow(base, C(-1.5, total.dtype()));
  const Value term1234 = Add(term1, Mul(term2, Add(term3, Select(Lt(x, mean), term4, Neg(term4)))));
  const Value far = Mul(Mul(correction, prefactor), term1234);
  const Value within =
      And(Le(Sub(mean, Times(0.1, deviation)), x), Le(x, Add(mean, Times(0.1, deviation))));
  return Select(within, near, far);
}

// A rational correction to x (digamma(total) - digamma(alpha)) / beta, in log x, log(alpha / x)
// and log(total) - log(alpha / x): the published fit's numerator [0] and denominator [1]
// coefficients, by power of log x, power of log(alpha / x), then the cubic's.
Value DirichletGradFit(const Value& x, const Value& alpha, const Value& total,
                       DType digamma_dtype) {
  static constexpr double kFit[2][3][3][4] = {
      {{{1.003668233, -0.01061107488, -0.0657888334, 0.01201642863},
        {0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033},
        {-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013}},
       {{0.221950385, -0.3187676331, 0.01799915743, 0.01074823814},
        {-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057},
        {0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05}},
       {{-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565},
        {0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181},
        {0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05}}},
      {{{1, -0.02924021934, -0.04438342661, 0.007285809825},
        {0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521},
        {-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149}},
       {{0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273},
        {0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956},
        {-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05}},
       {{0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05},
        {0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05},
        {-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06}}}};
  const Value u = Log(x);
  const Value a = Sub(Log(alpha), u);
  const Value b = Sub(Log(total), a);
  const Value powers_u[3] = {ConstantLike(1, x), u, Mul(u, u)};
  const Value powers_a[3] = {ConstantLike(1, x), a, Mul(a, a)};
  Value sums[2] = {ConstantLike(0, x), ConstantLike(0, x)};
  for (int part = 0; part < 2; ++part) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        const double* c = kFit[part][i][j];
        const Value cubic = Plus(Mul(b, Plus(Mul(b, Plus(Times(c[3], b), c[2])), c[1])), c[0]);
        sums[part] = Add(sums[part], Mul(Mul(powers_u[i], powers_a[j]), cubic));
      }
    }
  }
  // The CPU's digammas here take their arguments in the input's dtype.
  auto digamma = [&](const Value& v) {
    return Convert(Digamma(Convert(v, digamma_dtype)), v.dtype());
  };
  const Value approximation = Div(Mul(x, Sub(digamma(total), digamma(alpha))), Sub(total, alpha));
  return Mul(Div(sums[0], sums[1]), approximation);
}

// d x / d alpha for a Dirichlet sample's component x with concentration alpha of `total`, as
// the CPU's dirichlet_grad_one: the scaled gradient of a Beta(alpha, total - alpha) sample.
Value DirichletGrad(const Value& x, const Value& alpha, const Value& total) {
  // As there, the series near 0 and 1 run in x's dtype, the rest in double.
  const Value beta = Sub(total, alpha);
  const Value boundary = Mul(Mul(total, x), Minus(1, x));
  const Value near_zero = BetaGradAlphaSmall(x, alpha, beta);
  const Value near_one = Neg(BetaGradBetaSmall(Minus(1, x), beta, alpha));
  auto wide = [](const Value& v) { return Convert(v, DType::kF64); };
  const Value inner = Select(And(Gt(alpha, 6), Gt(beta, 6)),
                             BetaGradAlphaMid(wide(x), wide(alpha), Sub(wide(total), wide(alpha))),
                             DirichletGradFit(wide(x), wide(alpha), wide(total), x.dtype()));
  return Select(And(Le(x, 0.5), Lt(boundary, 2.5)), near_zero,
                Select(And(Ge(x, 0.5), Lt(boundary, 0.75)), near_one, Convert(inner, x.dtype())));
}

std::vector<Value> LowerDirichletGrad(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatingKernel("_dirichlet_grad_cpu", out.dtype);
  const DType t = OpMathType(out.dtype);
  const Value x = BroadcastTo(ctx.value(0, t), out.shape);
  const Value alpha = BroadcastTo(ctx.value(1, t), out.shape);
  const Value total = BroadcastTo(ctx.value(2, t), out.shape);
  return {Convert(DirichletGrad(x, alpha, total), out.dtype)};
}

const LoweringRegistrar registrar{
    {"_standard_gamma", LowerStandardGamma},
    {"_sample_dirichlet", LowerSampleDirichlet},
    {"poisson", LowerPoisson},
    {"binomial", LowerBinomial},
    {"_standard_gamma_grad", LowerStandardGammaGrad},
    {"_dirichlet_grad", LowerDirichletGrad},
};

}  // namespace
}  // namespace torch_tpu::ops
