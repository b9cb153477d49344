// Householder QR, batched over leading dims, in LAPACK's compact form: geqrf, the products of its
// reflectors (linalg_householder_product = orgqr/ungqr, ormqr/unmqr), linalg_qr built on them,
// and linalg_lstsq: its QR driver gels, and the rank-revealing gelsy, gelsd and gelss through the
// SVD (spectral.h). Each factorization or product is a stablehlo.while over the reflectors, so
// compile time does not grow with n. As on the CPU (LAPACK), float, double and complex (here
// complex64) have kernels.
//
// The reflectors follow LAPACK's dlarfg/zlarfg, so R's signs (and Q's) match the CPU's: for a
// column (alpha, x), beta = -sign(Re alpha) * ||(alpha, x)|| (real), tau = (beta - alpha) / beta
// and v = (1, x / (alpha - beta)), with H = I - tau v v^H and H^H (alpha, x) = (beta, 0); a
// column with x = 0 and a real alpha gets tau = 0 (H = I) and keeps alpha.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/spectral.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// ---- matrix helpers (the shared ones are in ops/matrix.h) ----

// The first `rows` rows and `columns` columns of each matrix.
Value TopLeft(const Value& x, int64_t rows, int64_t columns) {
  Value top = SliceAxis(x, x.rank() - 2, 0, rows);
  return SliceAxis(top, x.rank() - 1, 0, columns);
}

// Sum over the rows, kept as a size-1 dim: (*, m, c) -> (*, 1, c).
Value SumRows(const Value& x) {
  return KeepDims(SumOver(x, {x.rank() - 2}), x.shape(), {x.rank() - 2});
}

// ---- reflectors ----

// H c = (I - tau v v^H) c for v (*, m, 1), tau (*, 1, 1) and c (*, m, p). H^H is the reflector of
// conj(tau).
Value ApplyReflector(const Value& v, const Value& tau, const Value& c) {
  return Sub(c, Mul(Mul(tau, v), SumRows(Mul(Conjugate(v), c))));
}

// Reflector j of geqrf's compact form `a` (*, m, k): column j below the diagonal, with a unit
// diagonal and zeros above it (whatever `a` holds there).
Value HouseholderVector(const Value& a, const Value& j) {
  Value column = DynamicSliceAt(a, a.rank() - 1, j, 1);
  Value row = RowIndex(column.shape());
  Value unit = Convert(Compare(row, j, "EQ"), a.dtype());
  return Select(Compare(row, j, "GT"), column, unit);
}

// tau[..., j] as (*, 1, 1).
Value TauAt(const Value& tau, const Value& j) {
  const Shape batch(tau.shape().begin(), tau.shape().end() - 1);
  return Reshape(DynamicSliceAt(tau, tau.rank() - 1, j, 1), WithMatrix(batch, 1, 1));
}

// H_0 H_1 ... H_{k-1} c (reverse, as Q c) or H_{k-1}^H ... H_0^H c (as Q^H c), for the
// reflectors of `a` (*, m, >=k) and tau (*, k), c (*, m, p).
Value ApplyReflectors(const Value& a, Value tau, const Value& c, bool reverse) {
  const int64_t k = tau.shape().back();
  if (k == 0 || ir::NumElements(c.shape()) == 0) return c;
  if (!reverse) tau = Conjugate(tau);
  auto step = [&](const Value& i, const std::vector<Value>& v) {
    Value j = reverse ? Sub(S32(k - 1), i) : i;
    Value applied = ApplyReflector(HouseholderVector(v[1], j), TauAt(v[2], j), v[0]);
    return std::vector<Value>{applied, v[1], v[2]};
  };
  return ForLoop(k, {c, a, tau}, step)[0];
}

// ---- geqrf ----

struct QrFactors {
  Value qr;   // (*, m, n): R on and above the diagonal, the reflectors below it
  Value tau;  // (*, min(m, n))
};

// 2-norm over the rows of (*, m, 1), as (*, 1, 1) (real for a complex column); scaled by the
// largest magnitude so squares neither overflow nor underflow (as LAPACK's dnrm2).
Value ColumnNorm(const Value& column) {
  Value magnitude = Abs(column);
  Value largest = KeepDims(
      Reduce(magnitude, {column.rank() - 2}, "stablehlo.maximum", Constant(0, magnitude.dtype())),
      column.shape(), {column.rank() - 2});
  Value scale =
      Select(Compare(largest, ConstantLike(0, largest), "EQ"), ConstantLike(1, largest), largest);
  Value scaled = Div(magnitude, scale);
  return Mul(scale, Sqrt(SumRows(Mul(scaled, scaled))));
}

// dlarfg/zlarfg's reflector for the column (*, m, 1) whose row j holds alpha and rows below it x.
struct Reflector {
  Value vector;    // (*, m, 1): zero above row j, one at j
  Value tau;       // (*, 1, 1)
  Value diagonal;  // (*, 1, 1): R's entry at (j, j), beta (or alpha when H = I)
};

Reflector MakeReflector(const Value& column, const Value& j) {
  const DType t = column.dtype();
  Value row = RowIndex(column.shape());
  Value below = Compare(row, j, "GT");
  Value alpha = DynamicSliceAt(column, column.rank() - 2, j, 1);  // (*, 1, 1)
  Value tail_norm = ColumnNorm(Select(below, column, ConstantLike(0, column)));
  Value norm = ColumnNorm(Select(Compare(row, j, "GE"), column, ConstantLike(0, column)));
  Value real_alpha = Real(alpha), zero = ConstantLike(0, norm);
  Value trivial = Compare(tail_norm, zero, "EQ");
  // A complex alpha off the real axis still takes a reflector, which makes R's diagonal real.
  if (ir::IsComplex(t)) trivial = And(trivial, Compare(Imag(alpha), zero, "EQ"));
  Value beta = Select(Compare(real_alpha, zero, "GE"), Neg(norm), norm);
  // tau's parts divided by the real beta (as zlarfg), not a complex division.
  Value divisor_beta = Select(trivial, ConstantLike(1, beta), beta);
  Value tau = Div(Sub(beta, real_alpha), divisor_beta);
  if (ir::IsComplex(t)) tau = MakeComplex(tau, Div(Neg(Imag(alpha)), divisor_beta));
  tau = Select(trivial, ConstantLike(0, tau), tau);
  Value complex_beta = Convert(beta, t);
  Value divisor = Select(trivial, ConstantLike(1, alpha), Sub(alpha, complex_beta));
  Value unit = Convert(Compare(row, j, "EQ"), t);
  return {Select(below, Div(column, divisor), unit), tau, Select(trivial, alpha, complex_beta)};
}

// One dlarfg + dlarf step of the unblocked factorization (dgeqr2/zgeqr2) at column j: the
// trailing columns get H^H applied; column j becomes (R's entries, beta, v's tail).
std::vector<Value> GeqrfStep(const Value& j, const std::vector<Value>& v) {
  const Value &x = v[0], &taus = v[1];
  Value column = DynamicSliceAt(x, x.rank() - 1, j, 1);  // (*, m, 1)
  Reflector h = MakeReflector(column, j);
  Value row = RowIndex(column.shape());
  Value new_column =
      Select(Compare(row, j, "GT"), h.vector, Select(Compare(row, j, "EQ"), h.diagonal, column));
  Value column_index = ColumnIndex(x.shape());
  Value applied = ApplyReflector(h.vector, Conjugate(h.tau), x);
  Value updated =
      Select(Compare(column_index, j, "GT"), applied,
             Select(Compare(column_index, j, "EQ"), BroadcastTo(new_column, x.shape()), x));
  Value tau_index = Iota(TensorType{DType::kS32, taus.shape()}, taus.rank() - 1);
  Value tau_entry = Reshape(h.tau, WithLast(BatchOf(h.tau.shape()), 1));
  Value new_taus = Select(Compare(tau_index, j, "EQ"), BroadcastTo(tau_entry, taus.shape()), taus);
  return {updated, new_taus};
}

QrFactors Geqrf(const Value& a) {
  const int64_t k = std::min(Rows(a), Columns(a));
  Value tau = Constant(0, a.dtype(), WithLast(BatchOf(a.shape()), k));
  if (k == 0) return {a, tau};
  std::vector<Value> results = ForLoop(k, {a, tau}, GeqrfStep);
  return {results[0], results[1]};
}

// LAPACK's kernels exist for float, double and the complex types (complex64 here).
void CheckLapackKernel(const std::string& kernel, DType dtype) {
  if (!ir::IsComplex(dtype)) CheckFloatOrDoubleKernel(kernel, dtype);
}

// geqrf(self) -> (a, tau).
std::vector<Value> GeqrfLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("geqrf_cpu", a.dtype());
  QrFactors factors = Geqrf(a);
  return {factors.qr, factors.tau};
}

// ---- products of the reflectors ----

// linalg_householder_product(input, tau): the first n columns of H_0 ... H_{k-1}.
std::vector<Value> HouseholderProductLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("orgqr_cpu", a.dtype());
  Value identity = Identity(a.dtype(), a.shape());
  return {ApplyReflectors(a, ctx.tensor(1), identity, true)};
}

// ormqr(input, tau, other, left, transpose): op(Q) C or C op(Q), with Q = H_0 ... H_{k-1} and
// op(Q) = Q^H when transposed (Q^T for real Q). C Q = (Q^H C^H)^H, so the right side flips
// `transpose`.
std::vector<Value> OrmqrLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("ormqr_cpu", a.dtype());
  const bool left = ctx.bool_arg(3, true), transpose = ctx.bool_arg(4);
  Value c = ctx.tensor(2);
  if (left) return {ApplyReflectors(a, ctx.tensor(1), c, !transpose)};
  return {Adjoint(ApplyReflectors(a, ctx.tensor(1), Adjoint(c), transpose))};
}

// ---- linalg_qr ----

// linalg_qr(A, mode) -> (Q, R). 'reduced': Q (*, m, k), R (*, k, n); 'complete': Q (*, m, m),
// R (*, m, n); 'r': Q empty. The meta function rejects other modes.
std::vector<Value> LinalgQrLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("geqrf_cpu", a.dtype());
  const TensorType q_type = ctx.output(0), r_type = ctx.output(1);
  const int64_t r_rows = r_type.shape[r_type.shape.size() - 2];
  QrFactors factors = Geqrf(a);
  Value r = Triangle(TopLeft(factors.qr, r_rows, Columns(a)), false);
  // Mode 'r' (and an empty Q) has no Q to build.
  if (ir::NumElements(q_type.shape) == 0) {
    return {Constant(0, a.dtype(), q_type.shape), r};
  }
  Value q = ApplyReflectors(factors.qr, factors.tau, Identity(a.dtype(), q_type.shape), true);
  return {q, r};
}

// ---- linalg_lstsq ----

// Full-precision batched matmul: a solution must not lose bits to a fast precision mode.
Value MatMul(const Value& a, const Value& b) {
  std::vector<int64_t> batch;
  for (int64_t d = 0; d + 2 < a.rank(); ++d) batch.push_back(d);
  return DotGeneral(a, b, batch, batch, {a.rank() - 1}, {b.rank() - 2}, a.dtype(), true);
}

// Sum of |x|^2 over the rows, (*, m, c) -> (*, c), real.
Value SquaredColumnNorms(const Value& x) {
  Value magnitude = Abs(x);
  return SumOver(Mul(magnitude, magnitude), {x.rank() - 2});
}

// The real type of a LAPACK dtype: the singular values', residuals' and rcond's.
DType RealOf(DType dtype) { return ir::IsComplex(dtype) ? DType::kF32 : dtype; }

// LAPACK's gels for a full-rank a (*, m, n) and b (*, m, c): for m >= n, a = Q R and
// x = R^-1 (Q^H b)[:n], the rows of Q^H b below n holding the residual; for m < n, the minimum
// norm solution from a^H = Q R (a = R^H Q^H): x = Q [R^-H b; 0]. Returns x and the squared
// residual norms (*, c), unset unless m > n.
std::pair<Value, Value> Gels(const Value& a, const Value& b) {
  const int64_t m = Rows(a), n = Columns(a), c = Columns(b);
  if (m >= n) {
    QrFactors factors = Geqrf(a);
    Value projected = ApplyReflectors(factors.qr, factors.tau, b, false);
    Value x = TriangularSolve(TopLeft(factors.qr, n, n), TopLeft(projected, n, c), true, false,
                              false, false);
    if (m == n) return {x, Value{}};
    return {x, SquaredColumnNorms(SliceAxis(projected, b.rank() - 2, n, m))};
  }
  QrFactors factors = Geqrf(Adjoint(a));
  Value y = TriangularSolve(TopLeft(factors.qr, m, m), b, true, false, false, true, true);
  Value zeros = Constant(0, a.dtype(), WithMatrix(BatchOf(a.shape()), n - m, c));
  Value padded = Concatenate({y, zeros}, y.rank() - 2);
  return {ApplyReflectors(factors.qr, factors.tau, padded, true), Value{}};
}

// C++'s (and PyTorch's) machine epsilon of a real dtype.
double Epsilon(DType real) {
  return real == DType::kF64 ? std::numeric_limits<double>::epsilon()
                             : std::numeric_limits<float>::epsilon();
}

// LAPACK's relative machine precision (dlamch('E')), half of C++'s epsilon: what gelsd and gelss
// use in place of an rcond they do not accept.
double LapackEpsilon(DType real) { return Epsilon(real) / 2; }

// True (*, k) for the singular values s (*, k, descending) that count toward the rank: those
// above rcond * s_max. gelsd reads an rcond outside (0, 1) as LAPACK's epsilon (dlalsd), gelss a
// negative one (dgelss). gelsy keeps the leading R11 of its pivoted QR, whose estimated condition
// number is below 1 / rcond, and never drops the first pivot of a nonzero A: here the same
// threshold applied to the singular values (a substitute for its incremental condition
// estimates, which agrees with them wherever the rank is clear-cut), at least one kept.
Value KeptSingularValues(const Value& s, Value rcond, const std::string& driver) {
  Value eps = ConstantLike(LapackEpsilon(s.dtype()), rcond);
  Value zero = ConstantLike(0, rcond), one = ConstantLike(1, rcond);
  if (driver == "gelsd") {
    rcond = Select(Or(Compare(rcond, zero, "LE"), Compare(rcond, one, "GE")), eps, rcond);
  } else if (driver == "gelss") {
    rcond = Select(Compare(rcond, zero, "LT"), eps, rcond);
  }
  const int64_t last = s.rank() - 1;
  Value largest = BroadcastTo(SliceAxis(s, last, 0, 1), s.shape());
  Value positive = Compare(s, ConstantLike(0, s), "GT");
  Value kept = And(positive, Compare(s, Mul(largest, BroadcastTo(rcond, s.shape())), "GT"));
  if (driver == "gelsy") {
    Value first = Compare(Iota(TensorType{DType::kS32, s.shape()}, last), S32(0), "EQ");
    kept = Or(kept, And(first, positive));
  }
  return kept;
}

struct RankRevealing {
  Value solution;         // (*, n, c), the batch of a and b broadcast
  Value rank;             // (a's batch) s64
  Value singular_values;  // (a's batch, min(m, n)), real
};

// The minimum-norm least-squares solution of a (*, m, n) x = b (*, m, c), a of any rank, as
// gelsd and gelss compute it: x = V diag(1 / s_i over the kept s_i, else 0) U^H b. Each matrix
// of a is factored once, however many b's it broadcasts against.
RankRevealing SvdLeastSquares(const Value& a, const Value& b, const Value& rcond,
                              const std::string& driver) {
  ThinSvd svd = ThinSingularValueDecomposition(a);
  Value kept = KeptSingularValues(svd.s, rcond, driver);
  Value inverse = Select(kept, Div(ConstantLike(1, svd.s), svd.s), ConstantLike(0, svd.s));
  Value scale = Convert(Reshape(inverse, WithLast(inverse.shape(), 1)), a.dtype());  // (*, k, 1)
  const Shape batch = BroadcastShapes(BatchOf(a.shape()), BatchOf(b.shape()));
  auto broadcast = [&](const Value& x) {
    return BroadcastTo(x, WithMatrix(batch, Rows(x), Columns(x)));
  };
  Value projected = Mul(broadcast(scale), MatMul(broadcast(Adjoint(svd.u)), broadcast(b)));
  Value x = MatMul(broadcast(svd.v), projected);
  Value rank = SumOver(Convert(kept, DType::kS64), {kept.rank() - 1});
  return {x, rank, svd.s};
}

// linalg_lstsq(self, b, rcond, *, driver) -> (solution, residuals, rank, singular_values), its
// out= form (the functional op is its composite). The meta function (csrc/aten/qr_meta.cc)
// checked the shapes, dtypes and driver name, and sized each output as the driver fills it:
// residuals for gels with m > n, rank for the rank-revealing drivers, singular values for gelsd
// and gelss.
std::vector<Value> LstsqLowering(LoweringContext& ctx) {
  const std::string driver = ctx.has(3) ? ctx.string_arg(3) : "gelsy";
  Value a = ctx.tensor(0), b = ctx.tensor(1);
  if (a.rank() - b.rank() == 1) b = Reshape(b, WithLast(b.shape(), 1));  // a batch of vectors
  const TensorType &residuals_type = ctx.output(1), &rank_type = ctx.output(2),
                   &singular_type = ctx.output(3);
  auto zeros = [](const TensorType& type) { return Constant(0, type.dtype, type.shape); };
  // The CPU skips LAPACK for an A or b of no elements: x = 0, rank 0, residuals zero.
  if (ir::NumElements(a.shape()) == 0 || ir::NumElements(b.shape()) == 0) {
    return {zeros(ctx.output(0)), zeros(residuals_type), zeros(rank_type), zeros(singular_type)};
  }
  const Shape batch = BroadcastShapes(BatchOf(a.shape()), BatchOf(b.shape()));
  b = BroadcastTo(b, WithMatrix(batch, Rows(b), Columns(b)));
  if (driver == "gels") {
    auto [x, residuals] = Gels(BroadcastTo(a, WithMatrix(batch, Rows(a), Columns(a))), b);
    return {Reshape(x, ctx.output(0).shape), residuals ? residuals : zeros(residuals_type),
            zeros(rank_type), zeros(singular_type)};
  }
  const DType real = RealOf(a.dtype());
  // PyTorch's default rcond; a given one is a runtime parameter, so a new value does not
  // recompile.
  const double default_rcond = Epsilon(real) * static_cast<double>(std::max(Rows(a), Columns(a)));
  Value rcond = ctx.has(2) ? ctx.value(2, real) : Constant(default_rcond, real);
  RankRevealing result = SvdLeastSquares(a, b, rcond, driver);
  // Residuals, where the meta function asks for them (an A of full rank n < m), are those of the
  // solution.
  Value residuals =
      ir::NumElements(residuals_type.shape) == 0
          ? zeros(residuals_type)
          : SquaredColumnNorms(Sub(b, MatMul(BroadcastTo(a, WithMatrix(batch, Rows(a), Columns(a))),
                                             result.solution)));
  // The CPU's rank and singular values have A's batch; a meta function that broadcasts it gets
  // them broadcast.
  Value singular_values = ir::NumElements(singular_type.shape) == 0
                              ? zeros(singular_type)
                              : BroadcastTo(result.singular_values, singular_type.shape);
  return {Reshape(result.solution, ctx.output(0).shape), residuals,
          BroadcastTo(result.rank, rank_type.shape), singular_values};
}

LoweringRegistrar registrar({
    {"geqrf", GeqrfLowering},
    {"linalg_householder_product", HouseholderProductLowering},
    {"ormqr", OrmqrLowering},
    {"linalg_qr", LinalgQrLowering},
    {"linalg_lstsq", LstsqLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
