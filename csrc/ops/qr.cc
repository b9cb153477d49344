// Householder QR, batched over leading dims, in LAPACK's compact form: geqrf, the products of its
// reflectors (linalg_householder_product = orgqr, ormqr), linalg_qr built on them, and
// linalg_lstsq's QR driver (gels). Each factorization or product is a stablehlo.while over the
// reflectors, so compile time does not grow with n. As on the CPU (LAPACK), only f32 and f64
// have kernels.
//
// The reflectors follow LAPACK's dlarfg, so R's signs (and Q's) match the CPU's: for a column
// (alpha, x), beta = -sign(alpha) * ||(alpha, x)||, tau = (beta - alpha) / beta and
// v = (1, x / (alpha - beta)); a column with x = 0 gets tau = 0 (H = I) and keeps alpha.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
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

// H c = (I - tau v v^T) c for v (*, m, 1), tau (*, 1, 1) and c (*, m, p).
Value ApplyReflector(const Value& v, const Value& tau, const Value& c) {
  return Sub(c, Mul(Mul(tau, v), SumRows(Mul(v, c))));
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

// H_0 H_1 ... H_{k-1} c (reverse, as Q c) or H_{k-1} ... H_0 c (as Q^T c), for the reflectors
// of `a` (*, m, >=k) and tau (*, k), c (*, m, p).
Value ApplyReflectors(const Value& a, const Value& tau, const Value& c, bool reverse) {
  const int64_t k = tau.shape().back();
  if (k == 0 || ir::NumElements(c.shape()) == 0) return c;
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

// 2-norm over the rows of (*, m, 1), as (*, 1, 1); scaled by the largest magnitude so squares
// neither overflow nor underflow (as LAPACK's dnrm2).
Value ColumnNorm(const Value& column) {
  Value magnitude = Abs(column);
  Value largest = KeepDims(
      Reduce(magnitude, {column.rank() - 2}, "stablehlo.maximum", Constant(0, column.dtype())),
      column.shape(), {column.rank() - 2});
  Value scale =
      Select(Compare(largest, ConstantLike(0, largest), "EQ"), ConstantLike(1, largest), largest);
  Value scaled = Div(column, scale);
  return Mul(scale, Sqrt(SumRows(Mul(scaled, scaled))));
}

// One dlarfg + dlarf step of the unblocked factorization (dgeqr2) at column j.
std::vector<Value> GeqrfStep(const Value& j, const std::vector<Value>& v) {
  const Value &x = v[0], &taus = v[1];
  const int64_t columns_dim = x.rank() - 1;
  Value column = DynamicSliceAt(x, columns_dim, j, 1);  // (*, m, 1)
  Value row = RowIndex(column.shape());
  Value below = Compare(row, j, "GT");
  Value alpha = DynamicSliceAt(column, x.rank() - 2, j, 1);  // (*, 1, 1)
  Value tail = Select(below, column, ConstantLike(0, column));
  Value tail_norm = ColumnNorm(tail);
  Value norm = ColumnNorm(Select(Compare(row, j, "GE"), column, ConstantLike(0, column)));
  Value trivial = Compare(tail_norm, ConstantLike(0, tail_norm), "EQ");
  Value beta = Select(Compare(alpha, ConstantLike(0, alpha), "GE"), Neg(norm), norm);
  Value tau = Select(trivial, ConstantLike(0, beta), Div(Sub(beta, alpha), beta));
  Value divisor = Select(trivial, ConstantLike(1, beta), Sub(alpha, beta));
  Value unit = Convert(Compare(row, j, "EQ"), x.dtype());
  Value reflector = Select(below, Div(column, divisor), unit);
  // The trailing columns get H applied; column j becomes (R's entries, beta, v's tail).
  Value column_index = ColumnIndex(x.shape());
  Value applied = ApplyReflector(reflector, tau, x);
  Value new_column =
      Select(below, reflector, Select(Compare(row, j, "EQ"), Select(trivial, alpha, beta), column));
  Value updated =
      Select(Compare(column_index, j, "GT"), applied,
             Select(Compare(column_index, j, "EQ"), BroadcastTo(new_column, x.shape()), x));
  Value tau_index = Iota(TensorType{DType::kS32, taus.shape()}, taus.rank() - 1);
  Value tau_entry = Reshape(tau, WithLast(BatchOf(tau.shape()), 1));
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

// geqrf(self) -> (a, tau).
std::vector<Value> GeqrfLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckFloatOrDoubleKernel("geqrf_cpu", a.dtype());
  QrFactors factors = Geqrf(a);
  return {factors.qr, factors.tau};
}

// ---- products of the reflectors ----

// linalg_householder_product(input, tau): the first n columns of H_0 ... H_{k-1}.
std::vector<Value> HouseholderProductLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckFloatOrDoubleKernel("orgqr_cpu", a.dtype());
  Value identity = Identity(a.dtype(), a.shape());
  return {ApplyReflectors(a, ctx.tensor(1), identity, true)};
}

// ormqr(input, tau, other, left, transpose): op(Q) C or C op(Q), with Q = H_0 ... H_{k-1} and
// op(Q) = Q^T when transposed. C Q = (Q^T C^T)^T, so the right side flips `transpose`.
std::vector<Value> OrmqrLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckFloatOrDoubleKernel("ormqr_cpu", a.dtype());
  const bool left = ctx.bool_arg(3, true), transpose = ctx.bool_arg(4);
  Value c = ctx.tensor(2);
  if (left) return {ApplyReflectors(a, ctx.tensor(1), c, !transpose)};
  return {MatrixTranspose(ApplyReflectors(a, ctx.tensor(1), MatrixTranspose(c), transpose))};
}

// ---- linalg_qr ----

// linalg_qr(A, mode) -> (Q, R). 'reduced': Q (*, m, k), R (*, k, n); 'complete': Q (*, m, m),
// R (*, m, n); 'r': Q empty. The meta function rejects other modes.
std::vector<Value> LinalgQrLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckFloatOrDoubleKernel("geqrf_cpu", a.dtype());
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

struct LeastSquares {
  Value solution;   // (*, n, c)
  Value residuals;  // (*, c): squared norms of the residuals (m > n only)
};

// LAPACK's gels for a full-rank a (*, m, n) and b (*, m, c): for m >= n, a = Q R and
// x = R^-1 (Q^T b)[:n], the rows of Q^T b below n holding the residual; for m < n, the minimum
// norm solution from a^T = Q R (a = R^T Q^T): x = Q [R^-T b; 0].
LeastSquares Gels(const Value& a, const Value& b) {
  const int64_t m = Rows(a), n = Columns(a), c = Columns(b);
  if (m >= n) {
    QrFactors factors = Geqrf(a);
    Value projected = ApplyReflectors(factors.qr, factors.tau, b, false);
    Value tail = SliceAxis(projected, b.rank() - 2, n, m);
    Value x = TriangularSolve(TopLeft(factors.qr, n, n), TopLeft(projected, n, c), true, false,
                              false, false);
    return {x, m > n ? SumOver(Mul(tail, tail), {b.rank() - 2}) : Value{}};
  }
  QrFactors factors = Geqrf(MatrixTranspose(a));
  Value y = TriangularSolve(TopLeft(factors.qr, m, m), b, true, false, false, true);
  Value zeros = Constant(0, a.dtype(), WithMatrix(BatchOf(a.shape()), n - m, c));
  Value padded = Concatenate({y, zeros}, y.rank() - 2);
  return {ApplyReflectors(factors.qr, factors.tau, padded, true), Value{}};
}

// linalg_lstsq(self, b, rcond, *, driver) -> (solution, residuals, rank, singular_values), its
// out= form (the functional op is its composite). Only the QR driver gels: the CPU's default,
// gelsy, and gelsd/gelss decide the rank of A from its values (a rank-revealing factorization)
// and return a different solution for rank-deficient A, which this lowering does not compute.
std::vector<Value> LstsqLowering(LoweringContext& ctx) {
  // The meta function (csrc/aten/qr_meta.cc) checked the shapes, dtypes and driver name.
  const std::string driver = ctx.has(3) ? ctx.string_arg(3) : "gelsy";
  if (driver != "gels") {
    throw UnsupportedError("linalg_lstsq with driver '" + driver +
                           "' (rank-revealing) is not supported on tpu; driver='gels' solves "
                           "full-rank systems with QR");
  }
  Value a = ctx.tensor(0), b = ctx.tensor(1);
  if (a.rank() - b.rank() == 1) b = Reshape(b, WithLast(b.shape(), 1));  // a batch of vectors
  const Shape batch = BroadcastShapes(BatchOf(a.shape()), BatchOf(b.shape()));
  a = BroadcastTo(a, WithMatrix(batch, Rows(a), Columns(a)));
  b = BroadcastTo(b, WithMatrix(batch, Rows(b), Columns(b)));
  LeastSquares result = Gels(a, b);
  std::vector<Value> outputs{Reshape(result.solution, ctx.output(0).shape)};
  // The CPU skips LAPACK for an A of no elements, its residuals staying zero.
  const bool residuals = result.residuals && ir::NumElements(a.shape()) > 0;
  outputs.push_back(residuals ? result.residuals
                              : Constant(0, ctx.output(1).dtype, ctx.output(1).shape));
  outputs.push_back(Constant(0, ctx.output(2).dtype, ctx.output(2).shape));
  outputs.push_back(Constant(0, ctx.output(3).dtype, ctx.output(3).shape));
  return outputs;
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
