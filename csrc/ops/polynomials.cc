// The orthogonal polynomials of torch.special: Chebyshev T, U, V, W (plain and shifted to [0, 1]),
// Hermite H and He, Laguerre L and Legendre P, of x and a degree n that may differ per element.
//
// As on the CPU (ATen/native/Math.h): n is truncated to an integer (NaN, ±inf and out-of-range
// values read as negative), n < 0 gives 0, the family's edge values and closed forms come first,
// and otherwise the three-term recurrence runs n - 1 steps. The recurrence runs inside the program
// in one stablehlo.while for all elements: it stops when no element still needs a step, that is
// past the largest n among the elements in recurrence, or once those have all become NaN (where
// the CPU's loop stops too). n is never read back to the host.
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

Value C(double value, DType t) { return Constant(value, t); }
Value IsEqualTo(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "EQ"); }
Value IsLess(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "LT"); }
Value IsGreater(const Value& x, double value) { return Compare(x, C(value, x.dtype()), "GT"); }
Value Cos(const Value& x) { return Unary("stablehlo.cosine", x); }
Value Sin(const Value& x) { return Unary("stablehlo.sine", x); }
Value Acos(const Value& x) { return Unary("chlo.acos", x); }

// The degree and what the formulas need of it, per element.
struct Degree {
  Value n;               // s64
  Value real;            // n, n + 1 and 2n + 1 in the compute dtype, converted from int64 as
  Value plus_one;        // the CPU converts them
  Value two_n_plus_one;  //
  Value odd;             // bool
};

// static_cast<int64_t>(n) as x86 computes it: NaN, ±inf and values beyond int64 give INT64_MIN,
// which every family treats as n < 0; -1 stands in for it here.
Degree DegreeOf(const Value& n_float) {
  const DType t = n_float.dtype();
  const Value representable = IsLess(Abs(n_float), 9.2233720368547758e18);  // false for NaN
  Value n = Select(representable, Convert(n_float, DType::kS64), C(-1, DType::kS64));
  const Value one = C(1, DType::kS64);
  const Value odd = Compare(Binary("stablehlo.and", n, one), one, "EQ");
  return {n, Convert(n, t), Convert(Add(n, one), t), Convert(Add(Add(n, n), one), t), odd};
}

// ---- the three-term recurrence: P_{m+1} = (A(m, x) P_m - B(m) P_{m-1}) / C(m) ----

enum class Family { kChebyshev, kHermiteH, kHermiteHe, kLaguerre, kLegendre };

// One recurrence step from P_m = q and P_{m-1} = p, m as a 0-d value of x's dtype, in the CPU's
// order of operations.
Value RecurrenceStep(Family family, const Value& x, const Value& m, const Value& p,
                     const Value& q) {
  const DType t = x.dtype();
  switch (family) {
    case Family::kChebyshev:
      return Sub(Mul(Add(x, x), q), p);
    case Family::kHermiteH:
      return Sub(Mul(Add(x, x), q), Mul(Add(m, m), p));
    case Family::kHermiteHe:
      return Sub(Mul(x, q), Mul(m, p));
    case Family::kLaguerre:
      return Div(Sub(Mul(Add(Add(m, m), Sub(C(1, t), x)), q), Mul(m, p)), Add(m, C(1, t)));
    case Family::kLegendre:
      return Div(Sub(Mul(Mul(Add(Add(m, m), C(1, t)), x), q), Mul(m, p)), Add(m, C(1, t)));
  }
  throw std::logic_error("unknown polynomial family");
}

// P_n(x) for the elements where `in_recurrence` (n >= 2), from P_0 = 1 and P_1 = first. A region
// may not capture outer values, so x, n and the mask travel with the loop.
Value Recurrence(Family family, const Value& x, const Value& first, const Degree& degree,
                 const Value& in_recurrence) {
  const DType t = x.dtype();
  const Shape& shape = x.shape();
  std::vector<int64_t> all_dims;
  for (size_t d = 0; d < shape.size(); ++d) all_dims.push_back(static_cast<int64_t>(d));
  // Carried: the next degree m + 1 (s64, 0-d), P_{m-1}, P_m, x, n, in_recurrence.
  std::vector<Value> initial{C(2, DType::kS64),
                             Constant(1, t, shape),
                             BroadcastTo(first, shape),
                             x,
                             BroadcastTo(degree.n, shape),
                             BroadcastTo(in_recurrence, shape)};
  std::vector<TensorType> types;
  for (const Value& v : initial) types.push_back(v.type());
  auto active = [&](const std::vector<Value>& v) {
    const Value pending = Compare(BroadcastTo(v[0], shape), v[4], "LE");
    return And(And(v[5], pending), Not(IsNan(v[2])));
  };
  auto condition = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    return std::vector<Value>{
        Reduce(active(v), all_dims, "stablehlo.or", ir::IntegerConstant(0, DType::kBool))};
  });
  auto step = ir::MakeRegion(types, [&](const std::vector<Value>& v) {
    const Value m = Convert(Sub(v[0], C(1, DType::kS64)), t);
    const Value next = RecurrenceStep(family, v[3], m, v[1], v[2]);
    const Value update = active(v);
    return std::vector<Value>{Add(v[0], C(1, DType::kS64)),
                              Select(update, v[2], v[1]),
                              Select(update, next, v[2]),
                              v[3],
                              v[4],
                              v[5]};
  });
  return ir::MakeMultiOp("stablehlo.while", initial, types, "",
                         {std::move(condition), std::move(step)})[2];
}

// The value for n >= 0 from the special cases (in the CPU's order: the first that holds wins),
// then n = 0, n = 1 and the recurrence.
struct Case {
  Value holds;
  Value value;
};
Value Evaluate(Family family, const Value& x, const Value& first, const Degree& degree,
               const std::vector<Case>& cases) {
  const DType t = x.dtype();
  Value taken = Compare(degree.n, C(2, DType::kS64), "LT");
  for (const Case& c : cases) taken = Or(taken, c.holds);
  Value result = Recurrence(family, x, first, degree, Not(taken));
  result = Select(Compare(degree.n, C(1, DType::kS64), "EQ"), first, result);
  result = Select(Compare(degree.n, C(0, DType::kS64), "EQ"), C(1, t), result);
  for (auto c = cases.rbegin(); c != cases.rend(); ++c) result = Select(c->holds, c->value, result);
  return Select(Compare(degree.n, C(0, DType::kS64), "LT"), C(0, t), result);
}

// ---- Chebyshev polynomials of the four kinds, of y = x or y = 2x - 1 (shifted) ----

enum class Kind { kT, kU, kV, kW };

struct ChebyshevOp {
  Kind kind;
  bool shifted;
  int closed_form_above;  // the closed form in acos(y) is used for n above this when |y| < 1
};

// (-1)^n v.
Value AlternatingSign(const Degree& degree, const Value& v) {
  return Select(degree.odd, Neg(v), v);
}

// The closed forms in theta = acos(y), with the CPU's fallback where their denominators vanish.
Value ChebyshevClosedForm(const ChebyshevOp& op, const Value& y, const Degree& degree) {
  const DType t = y.dtype();
  const Value theta = Acos(y), n = degree.real;
  const Value n_plus_half = Add(n, C(0.5, t)), n_plus_one = degree.plus_one;
  const Value two_n_plus_one = degree.two_n_plus_one;
  switch (op.kind) {
    case Kind::kT:
      return Cos(Mul(n, theta));
    case Kind::kU: {
      const Value sine = Sin(theta);
      return Select(Compare(sine, C(0, t), "NE"), Div(Sin(Mul(n_plus_one, theta)), sine),
                    Div(Mul(n_plus_one, Cos(Mul(n_plus_one, theta))), y));
    }
    case Kind::kV: {
      const Value half = Div(theta, C(2, t));
      return Select(Compare(Sin(half), C(1, t), "NE"), Div(Cos(Mul(n_plus_half, theta)), Cos(half)),
                    AlternatingSign(degree, two_n_plus_one));
    }
    case Kind::kW: {
      const Value half = Div(theta, C(2, t));
      // The shifted kernel gives (-1)^n here even though y > 0.
      const Value degenerate = op.shifted ? AlternatingSign(degree, C(1, t)) : two_n_plus_one;
      return Select(Compare(Cos(half), C(1, t), "NE"), Div(Sin(Mul(n_plus_half, theta)), Sin(half)),
                    degenerate);
    }
  }
  throw std::logic_error("unknown Chebyshev kind");
}

Value Chebyshev(const ChebyshevOp& op, const Value& x, const Degree& degree) {
  const DType t = x.dtype();
  const Value y = op.shifted ? Sub(Add(x, x), C(1, t)) : x;
  const Value two_n_plus_one = degree.two_n_plus_one;
  Value first = y;
  Value at_one = C(1, t), at_minus_one = AlternatingSign(degree, C(1, t));
  if (op.kind == Kind::kU) {
    first = Add(y, y);
    at_one = degree.plus_one;
    at_minus_one = AlternatingSign(degree, at_one);
  } else if (op.kind == Kind::kV) {
    first = Sub(Add(y, y), C(1, t));
    at_minus_one = AlternatingSign(degree, two_n_plus_one);
  } else if (op.kind == Kind::kW) {
    first = Add(Add(y, y), C(1, t));
    at_one = two_n_plus_one;
  }
  // The edges are tested on x: |x| == 1 (plain), x == 1 and x == 0 (shifted).
  const Value is_one = IsEqualTo(x, 1);
  const Value is_minus_one = op.shifted ? IsEqualTo(x, 0) : IsEqualTo(x, -1);
  const Value closed =
      And(Compare(degree.n, C(op.closed_form_above, DType::kS64), "GT"), IsLess(Abs(y), 1));
  return Evaluate(Family::kChebyshev, y, first, degree,
                  {{is_one, at_one},
                   {is_minus_one, at_minus_one},
                   {closed, ChebyshevClosedForm(op, y, degree)}});
}

const std::unordered_map<std::string, ChebyshevOp>& ChebyshevOps() {
  static const std::unordered_map<std::string, ChebyshevOp> ops = {
      {"special_chebyshev_polynomial_t", {Kind::kT, false, 6}},
      {"special_chebyshev_polynomial_u", {Kind::kU, false, 8}},
      {"special_chebyshev_polynomial_v", {Kind::kV, false, 8}},
      {"special_chebyshev_polynomial_w", {Kind::kW, false, 8}},
      {"special_shifted_chebyshev_polynomial_t", {Kind::kT, true, 6}},
      {"special_shifted_chebyshev_polynomial_u", {Kind::kU, true, 6}},
      {"special_shifted_chebyshev_polynomial_v", {Kind::kV, true, 6}},
      {"special_shifted_chebyshev_polynomial_w", {Kind::kW, true, 4}},
  };
  return ops;
}

// ---- Hermite, Laguerre, Legendre ----

// Hermite polynomials are NaN above this degree (the CPU's limit: 128 for float, 512 double).
Value HermiteLimit(const Degree& degree, DType t) {
  return Compare(degree.n, C(t == DType::kF64 ? 512 : 128, DType::kS64), "GT");
}

Value HermiteH(const Value& x, const Degree& degree) {
  const DType t = x.dtype();
  return Evaluate(Family::kHermiteH, x, Add(x, x), degree, {{HermiteLimit(degree, t), C(NAN, t)}});
}

Value HermiteHe(const Value& x, const Degree& degree) {
  const DType t = x.dtype();
  return Evaluate(Family::kHermiteHe, x, x, degree, {{HermiteLimit(degree, t), C(NAN, t)}});
}

Value Laguerre(const Value& x, const Degree& degree) {
  const DType t = x.dtype();
  return Evaluate(Family::kLaguerre, x, Sub(C(1, t), x), degree, {{IsEqualTo(x, 0), C(1, t)}});
}

Value Legendre(const Value& x, const Degree& degree) {
  const DType t = x.dtype();
  return Evaluate(
      Family::kLegendre, x, x, degree,
      {{IsEqualTo(x, 1), C(1, t)}, {IsEqualTo(x, -1), AlternatingSign(degree, C(1, t))}});
}

using PolynomialFn = Value (*)(const Value&, const Degree&);
const std::unordered_map<std::string, PolynomialFn>& OtherPolynomials() {
  static const std::unordered_map<std::string, PolynomialFn> ops = {
      {"special_hermite_polynomial_h", HermiteH},
      {"special_hermite_polynomial_he", HermiteHe},
      {"special_laguerre_polynomial_l", Laguerre},
      {"special_legendre_polynomial_p", Legendre},
  };
  return ops;
}

// (x, n), both promoted to the output's float dtype as the CPU does before truncating n.
std::vector<Value> PolynomialLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  CheckFloatOrDoubleKernel(ctx.name.substr(std::string("special_").size()) + "_cpu", out.dtype);
  const Value x = BroadcastTo(ctx.value(0, out.dtype), out.shape);
  const Value n = BroadcastTo(ctx.value(1, out.dtype), out.shape);
  const Degree degree = DegreeOf(n);
  const auto chebyshev = ChebyshevOps().find(ctx.name);
  const Value result = chebyshev != ChebyshevOps().end()
                           ? Chebyshev(chebyshev->second, x, degree)
                           : OtherPolynomials().at(ctx.name)(x, degree);
  return {result};
}

const bool registered = [] {
  for (const auto& entry : ChebyshevOps()) RegisterLowering(entry.first, PolynomialLowering);
  for (const auto& entry : OtherPolynomials()) RegisterLowering(entry.first, PolynomialLowering);
  return true;
}();

}  // namespace
}  // namespace torch_tpu::ops
