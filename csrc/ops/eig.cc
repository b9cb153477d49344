// linalg_eig and _linalg_eigvals: the eigenvalues and eigenvectors of general square matrices,
// batched over leading dims, inside the program (the CPU and CUDA call LAPACK's geev on the host):
//
// 1. Householder reduction to upper Hessenberg form, H = Q^H A Q.
// 2. Shifted QR iteration on H in complex arithmetic, one Givens sweep over the unreduced window
//    [lo, hi] per iteration (Wilkinson's shift, and an exceptional shift after every 10 iterations
//    without a deflation, as LAPACK's zlahqr), until H is upper triangular: the Schur form
//    T = Z^H A Z, whose diagonal holds the eigenvalues.
// 3. The eigenvectors of T by back substitution ((T - t_kk I) x = 0 with x_k = 1), mapped back
//    by Z and normalized as geev's: unit 2-norm, largest component real.
//
// Each stage is a stablehlo.while, so the program's size does not grow with n. Real input is
// computed in complex64, the outputs' type. As torch.linalg.eig documents, the eigenvalues'
// order is not specified: here it is the order in which they converged, which in general is not
// LAPACK's; each eigenvector is unique up to a phase.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

constexpr double kEpsilon = std::numeric_limits<float>::epsilon();

Value C64(double value, const Shape& shape = {}) { return Constant(value, DType::kC64, shape); }

// |z| as a complex value, to scale complex ones.
Value AbsComplex(const Value& z) { return Convert(Abs(z), DType::kC64); }

// Batch-wide (*) s32 or complex per-matrix values as (*, 1, 1), to act on whole matrices.
Value Broadcast(const Value& per_matrix, const Shape& shape) {
  return BroadcastTo(PerMatrix(per_matrix), shape);
}

// x[..., row[b], column[b]] for per-matrix indices row, column (*) s32: the entry as (*).
Value EntryAt(const Value& x, const Value& row, const Value& column) {
  Value at = And(Compare(RowIndex(x.shape()), Broadcast(row, x.shape()), "EQ"),
                 Compare(ColumnIndex(x.shape()), Broadcast(column, x.shape()), "EQ"));
  return SumOver(Select(at, x, ConstantLike(0, x)), {x.rank() - 2, x.rank() - 1});
}

// The entries of each matrix with column - row == offset, as (*, n) indexed by row (zero where
// that diagonal has no entry).
Value DiagonalOf(const Value& x, int64_t offset) {
  Value on = Compare(Sub(ColumnIndex(x.shape()), RowIndex(x.shape())), S32(offset), "EQ");
  return SumOver(Select(on, x, ConstantLike(0, x)), {x.rank() - 1});
}

// ---- 1. Hessenberg reduction ----

// Householder step j: a Hermitian reflector P = I - 2 u u^H / (u^H u) that zeros column j below
// row j + 1, applied as P H P and accumulated as Q P.
std::vector<Value> HessenbergStep(const Value& j, const std::vector<Value>& v) {
  const Value &h = v[0], &q = v[1];
  const int64_t rows_dim = h.rank() - 2, columns_dim = h.rank() - 1;
  Value column = DynamicSliceAt(h, columns_dim, j, 1);  // (*, n, 1)
  Value row = RowIndex(column.shape());
  Value first = Add(j, S32(1));
  Value below = Compare(row, first, "GT");
  Value tail = Select(below, column, ConstantLike(0, column));
  Value alpha = DynamicSliceAt(column, rows_dim, first, 1);  // (*, 1, 1)
  Value norm = Sqrt(Add(SumOver(Mul(Abs(tail), Abs(tail)), {rows_dim, columns_dim}),
                        Reshape(Mul(Abs(alpha), Abs(alpha)), BatchOf(h.shape()))));
  // alpha's phase (1 for alpha = 0): adding, not subtracting, its multiple of the norm avoids
  // cancellation.
  Value alpha_abs = Abs(alpha);
  Value zero_alpha = Compare(alpha_abs, ConstantLike(0, alpha_abs), "EQ");
  Value phase = Select(zero_alpha, ConstantLike(1, alpha), Div(alpha, AbsComplex(alpha)));
  Value head = Add(alpha, Mul(phase, Convert(PerMatrix(norm), DType::kC64)));
  Value u = Select(below, tail,
                   Select(Compare(row, first, "EQ"), BroadcastTo(head, column.shape()),
                          ConstantLike(0, column)));
  Value uu = SumOver(Mul(Abs(u), Abs(u)), {rows_dim, columns_dim});  // (*), real
  Value usable = Compare(uu, ConstantLike(0, uu), "GT");
  Value factor =
      Convert(Select(usable, Div(ConstantLike(2, uu), Select(usable, uu, ConstantLike(1, uu))),
                     ConstantLike(0, uu)),
              DType::kC64);
  Value scaled_u = Mul(u, PerMatrix(factor));  // (*, n, 1)
  Value u_h = MatrixTranspose(Conjugate(u));   // (*, 1, n)
  Value left = KeepDims(SumOver(Mul(Conjugate(u), h), {rows_dim}), h.shape(), {rows_dim});
  Value reflected = Sub(h, Mul(scaled_u, left));  // P H
  auto times_p = [&](const Value& x) {            // x P
    Value xu =
        KeepDims(SumOver(Mul(x, MatrixTranspose(u)), {columns_dim}), x.shape(), {columns_dim});
    return Sub(x, Mul(Mul(xu, PerMatrix(factor)), u_h));
  };
  return {times_p(reflected), times_p(q)};
}

struct Hessenberg {
  Value h;  // (*, n, n), zero below the first subdiagonal
  Value q;  // (*, n, n), unitary, A = Q H Q^H
};

Hessenberg ReduceToHessenberg(const Value& a) {
  const int64_t n = Columns(a);
  Value q = Identity(DType::kC64, a.shape());
  if (n < 3) return {a, q};
  std::vector<Value> result = ForLoop(n - 2, {a, q}, HessenbergStep);
  Value below = Compare(Sub(RowIndex(a.shape()), ColumnIndex(a.shape())), S32(1), "GT");
  return {Select(below, ConstantLike(0, a), result[0]), result[1]};
}

// ---- 2. Shifted QR iteration ----

// The rotation G = [[c, s], [-conj(s), c]] (c real) with G (a, b)^T = (r, 0)^T, as (c, s), each
// (*, 1, 1); the identity where `active` (*, 1, 1) is false or b is already 0.
std::vector<Value> Givens(const Value& a, const Value& b, const Value& active) {
  Value abs_a = Abs(a), abs_b = Abs(b);
  Value r = Sqrt(Add(Mul(abs_a, abs_a), Mul(abs_b, abs_b)));
  Value trivial = Or(Not(active), Compare(abs_b, ConstantLike(0, abs_b), "EQ"));
  Value safe_r = Select(trivial, ConstantLike(1, r), r);
  Value zero_a = Compare(abs_a, ConstantLike(0, abs_a), "EQ");
  Value phase =
      Select(zero_a, ConstantLike(1, a), Div(a, AbsComplex(Select(zero_a, ConstantLike(1, a), a))));
  Value c = Convert(Div(abs_a, safe_r), DType::kC64);
  Value s = Div(Mul(phase, Conjugate(b)), Convert(safe_r, DType::kC64));
  return {Select(trivial, ConstantLike(1, c), c), Select(trivial, ConstantLike(0, s), s)};
}

// Wilkinson's shift: the eigenvalue of the window's trailing 2x2 [[a, b], [c, d]] nearer d.
Value WilkinsonShift(const Value& a, const Value& b, const Value& c, const Value& d) {
  Value half_gap = Mul(Sub(a, d), ConstantLike(0.5, a));
  Value root = Sqrt(Add(Mul(half_gap, half_gap), Mul(b, c)));
  Value plus = Add(half_gap, root), minus = Sub(half_gap, root);
  Value denominator = Select(Compare(Abs(plus), Abs(minus), "GE"), plus, minus);
  Value zero = Compare(Abs(denominator), ConstantLike(0, Abs(denominator)), "EQ");
  return Select(zero, d, Sub(d, Div(Mul(b, c), Select(zero, ConstantLike(1, d), denominator))));
}

// One explicit shifted QR step H - mu I = G^H R, H <- R G^H + mu I on each matrix's window
// [lo, hi] (where `step` (*) holds), by n - 1 Givens rotations of rows, then of columns (and
// of Z's columns). Rotations outside a window are the identity, so the whole matrix transforms
// by one unitary similarity and stays a Schur form's predecessor.
std::vector<Value> QrSweep(const Value& h, const Value& z, const Value& lo, const Value& hi,
                           const Value& mu, const Value& step) {
  const int64_t n = Columns(h), rows_dim = h.rank() - 2, columns_dim = h.rank() - 1;
  const Shape batch = BatchOf(h.shape());
  Value diagonal = DiagonalMask(h.shape());
  Value row = RowIndex(h.shape());
  Value window = And(diagonal, And(Compare(row, Broadcast(lo, h.shape()), "GE"),
                                   Compare(row, Broadcast(hi, h.shape()), "LE")));
  Value shift = Select(window, Broadcast(mu, h.shape()), ConstantLike(0, h));
  Value rotations = C64(0, WithLast(batch, n));  // c, then s, per k: carried in two arrays
  // Regions see only carried values: the window and `step` ride along.
  auto left = [&](const Value& k, const std::vector<Value>& v) {
    const Value &m = v[0], &cs = v[1], &ss = v[2], &first = v[3], &end = v[4];
    Value active = And(v[5], And(Compare(BroadcastTo(k, first.shape()), first, "GE"),
                                 Compare(BroadcastTo(k, end.shape()), end, "LT")));
    Value rows = DynamicSliceAt(m, rows_dim, k, 2);         // (*, 2, n)
    Value pivot = DynamicSliceAt(rows, columns_dim, k, 1);  // (*, 2, 1)
    std::vector<Value> g = Givens(SliceAxis(pivot, rows_dim, 0, 1),
                                  SliceAxis(pivot, rows_dim, 1, 2), PerMatrix(active));
    Value top = SliceAxis(rows, rows_dim, 0, 1), bottom = SliceAxis(rows, rows_dim, 1, 2);
    Value rotated = Concatenate(
        {Add(Mul(g[0], top), Mul(g[1], bottom)), Sub(Mul(g[0], bottom), Mul(Conjugate(g[1]), top))},
        rows_dim);
    Value at = Compare(Iota(TensorType{DType::kS32, cs.shape()}, cs.rank() - 1), k, "EQ");
    auto record = [&](const Value& entry, const Value& array) {
      return Select(at, BroadcastTo(Reshape(entry, WithLast(batch, 1)), array.shape()), array);
    };
    return std::vector<Value>{DynamicUpdateSliceAt(m, rotated, rows_dim, k),
                              record(g[0], cs),
                              record(g[1], ss),
                              first,
                              end,
                              v[5]};
  };
  std::vector<Value> r = ForLoop(n - 1, {Sub(h, shift), rotations, rotations, lo, hi, step}, left);
  // X G^H: column k <- c x_k + conj(s) x_{k+1}, column k + 1 <- c x_{k+1} - s x_k.
  auto rotate_columns = [&](const Value& x, const Value& c, const Value& s, const Value& k) {
    Value columns = DynamicSliceAt(x, columns_dim, k, 2);  // (*, n, 2)
    Value first = SliceAxis(columns, columns_dim, 0, 1),
          second = SliceAxis(columns, columns_dim, 1, 2);
    Value rotated = Concatenate(
        {Add(Mul(c, first), Mul(Conjugate(s), second)), Sub(Mul(c, second), Mul(s, first))},
        columns_dim);
    return DynamicUpdateSliceAt(x, rotated, columns_dim, k);
  };
  auto right = [&](const Value& k, const std::vector<Value>& v) {
    Value c = PerMatrix(Reshape(DynamicSliceAt(v[2], v[2].rank() - 1, k, 1), batch));
    Value s = PerMatrix(Reshape(DynamicSliceAt(v[3], v[3].rank() - 1, k, 1), batch));
    return std::vector<Value>{rotate_columns(v[0], c, s, k), rotate_columns(v[1], c, s, k), v[2],
                              v[3]};
  };
  std::vector<Value> result = ForLoop(n - 1, {r[0], z, r[1], r[2]}, right);
  return {Add(result[0], shift), result[1]};
}

struct Schur {
  Value t;          // (*, n, n), upper triangular
  Value z;          // (*, n, n), unitary, A = Z T Z^H
  Value converged;  // (*) bool
};

// LAPACK's zlahqr allows 30 iterations per eigenvalue (and at least 300 in all).
int64_t IterationCap(int64_t n) { return 30 * std::max<int64_t>(10, n); }

// (*, n) by row or by column of a (*, n, n): v[r] or v[c] at every entry (r, c).
Value AlongRows(const Value& v, const Shape& shape, bool by_row) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d + 1 < v.rank(); ++d) dims.push_back(d);
  dims.push_back(static_cast<int64_t>(shape.size()) - (by_row ? 2 : 1));
  return BroadcastInDim(v, shape, dims);
}

// QR iteration from a Hessenberg h (scaled so its largest entry is about 1) and its Q. Each
// iteration either deflates the window's last eigenvalue (its subdiagonal entry is negligible:
// hi <- hi - 1) or takes one QR step on the window.
Schur QrIteration(const Value& h, const Value& q) {
  const int64_t n = Columns(h), columns_dim = h.rank() - 1;
  const Shape batch = BatchOf(h.shape());
  auto per_matrix = [&](int64_t value) { return BroadcastTo(S32(value), batch); };
  if (n < 2) return {h, q, BroadcastTo(ir::IntegerConstant(1, DType::kBool), batch)};
  std::vector<Value> initial{S32(0), h, q, per_matrix(n - 1), per_matrix(0)};
  auto condition = [&](const std::vector<Value>& v) {
    return And(Compare(v[0], S32(IterationCap(n)), "LT"),
               AnyOf(Compare(v[3], per_matrix(0), "GT")));
  };
  auto body = [&](const std::vector<Value>& v) {
    Value m = v[1];
    const Value &hi = v[3], &stalled = v[4];
    // zlahqr's test: h[l, l-1] is negligible when |h[l, l-1]| <= eps (|h[l-1, l-1]| + |h[l, l]|)
    // (the scaled matrix's norm, 1, standing in where both are zero). Those entries become zero.
    Value magnitude = Abs(m);
    Value diagonal = DiagonalOf(magnitude, 0);
    Value neighbours =
        Add(AlongRows(diagonal, m.shape(), true), AlongRows(diagonal, m.shape(), false));
    neighbours = Select(Compare(neighbours, ConstantLike(0, neighbours), "EQ"),
                        ConstantLike(1, neighbours), neighbours);
    Value row = RowIndex(m.shape());
    Value subdiagonal = Compare(Sub(row, ColumnIndex(m.shape())), S32(1), "EQ");
    Value negligible = And(
        subdiagonal, Compare(magnitude, Mul(neighbours, ConstantLike(kEpsilon, neighbours)), "LE"));
    m = Select(negligible, ConstantLike(0, m), m);
    // The window [lo, hi]: lo is the last row at or above hi whose subdiagonal entry is zero.
    Value split =
        Reduce(negligible, {columns_dim}, "stablehlo.or", ir::IntegerConstant(0, DType::kBool));
    Value rows = Iota(TensorType{DType::kS32, split.shape()}, split.rank() - 1);
    Value candidates =
        And(split, Compare(rows, BroadcastTo(Reshape(hi, WithLast(batch, 1)), rows.shape()), "LE"));
    Value lo = Reduce(Select(candidates, rows, ConstantLike(0, rows)), {rows.rank() - 1},
                      "stablehlo.maximum", S32(0));
    Value active = Compare(hi, per_matrix(0), "GT");
    Value deflate = And(active, Compare(lo, hi, "EQ"));
    Value step = And(active, Compare(lo, hi, "LT"));
    // The shift: Wilkinson's, or after every 10 steps without a deflation zlahqr's exceptional
    // h[hi, hi] + 3/4 |h[hi, hi-1]|, which breaks the cycles Wilkinson's can fall into.
    Value before = Sub(hi, per_matrix(1));
    Value a = EntryAt(m, before, before), b = EntryAt(m, before, hi);
    Value c = EntryAt(m, hi, before), d = EntryAt(m, hi, hi);
    Value count = Add(stalled, per_matrix(1));
    Value exceptional =
        Compare(Binary("stablehlo.remainder", count, per_matrix(10)), per_matrix(0), "EQ");
    Value kick = Add(d, Mul(AbsComplex(c), ConstantLike(0.75, d)));
    Value mu = Select(exceptional, kick, WilkinsonShift(a, b, c, d));
    std::vector<Value> swept = QrSweep(m, v[2], lo, hi, mu, step);
    return std::vector<Value>{Add(v[0], S32(1)), swept[0], swept[1],
                              Select(deflate, Sub(hi, per_matrix(1)), hi),
                              Select(step, count, per_matrix(0))};
  };
  std::vector<Value> result = While(initial, condition, body);
  Value strictly_lower = Compare(Sub(RowIndex(h.shape()), ColumnIndex(h.shape())), S32(0), "GT");
  return {Select(strictly_lower, ConstantLike(0, result[1]), result[1]), result[2],
          Compare(result[3], per_matrix(0), "LE")};
}

// ---- 3. Eigenvectors ----

// Full-precision batched matmul.
Value MatMul(const Value& a, const Value& b) {
  std::vector<int64_t> batch;
  for (int64_t d = 0; d + 2 < a.rank(); ++d) batch.push_back(d);
  return DotGeneral(a, b, batch, batch, {a.rank() - 1}, {b.rank() - 2}, a.dtype(), true);
}

// The eigenvectors of an upper triangular t, as the columns of an upper triangular x with a unit
// diagonal: rows from the bottom up, x[i, k] = -(sum_{j > i} t[i, j] x[j, k]) / (t[i, i] - t[k, k])
// for k > i. A divisor below eps |t| is raised to that (ztrevc's smin), so repeated eigenvalues
// give large but finite entries, as LAPACK's do.
Value TriangularEigenvectors(const Value& t) {
  const int64_t n = Columns(t), rows_dim = t.rank() - 2, columns_dim = t.rank() - 1;
  Value diagonal = Reshape(DiagonalOf(t, 0), WithMatrix(BatchOf(t.shape()), 1, n));  // (*, 1, n)
  Value largest =
      Reduce(Abs(t), {rows_dim, columns_dim}, "stablehlo.maximum", Constant(0, DType::kF32));
  Value smallest = PerMatrix(Max(Mul(largest, ConstantLike(kEpsilon, largest)),
                                 ConstantLike(std::numeric_limits<float>::min(), largest)));
  // Regions see only carried values: t, its diagonal and the divisor floor ride along.
  auto body = [&](const Value& j, const std::vector<Value>& v) {
    const Value &x = v[0], &upper = v[1], &eigenvalues = v[2], &floor = v[3];
    Value i = Sub(S32(n - 2), j);
    Value t_row = DynamicSliceAt(upper, rows_dim, i, 1);  // (*, 1, n)
    Value column = ColumnIndex(t_row.shape());
    Value after = Compare(column, i, "GT");
    Value sums = MatMul(Select(after, t_row, ConstantLike(0, t_row)), x);
    Value divisor = Sub(BroadcastTo(DynamicSliceAt(t_row, columns_dim, i, 1), t_row.shape()),
                        BroadcastTo(eigenvalues, t_row.shape()));
    Value tiny = Compare(Abs(divisor), BroadcastTo(floor, t_row.shape()), "LT");
    divisor = Select(tiny, Convert(BroadcastTo(floor, t_row.shape()), DType::kC64), divisor);
    Value unit = Select(Compare(column, i, "EQ"), ConstantLike(1, t_row), ConstantLike(0, t_row));
    Value x_row = Select(after, Neg(Div(sums, divisor)), unit);
    return std::vector<Value>{DynamicUpdateSliceAt(x, x_row, rows_dim, i), upper, eigenvalues,
                              floor};
  };
  Value identity = Identity(DType::kC64, t.shape());
  return n < 2 ? identity : ForLoop(n - 1, {identity, t, diagonal, smallest}, body)[0];
}

// geev's normalization of each column: unit 2-norm, and the largest component (the first of
// the largest) real and positive.
Value NormalizeColumns(const Value& v) {
  const int64_t rows_dim = v.rank() - 2;
  Value magnitude = Abs(v);
  Value squares = Mul(magnitude, magnitude);
  Value norms = KeepDims(Sqrt(SumOver(squares, {rows_dim})), v.shape(), {rows_dim});  // (*, 1, n)
  Value largest =
      KeepDims(Reduce(squares, {rows_dim}, "stablehlo.maximum", Constant(0, DType::kF32)),
               v.shape(), {rows_dim});
  Value row = RowIndex(v.shape());
  Value at_largest = Compare(squares, BroadcastTo(largest, v.shape()), "EQ");
  Value first = KeepDims(Reduce(Select(at_largest, row, ConstantLike(Rows(v), row)), {rows_dim},
                                "stablehlo.minimum", S32(Rows(v))),
                         v.shape(), {rows_dim});
  Value pivot_mask = Compare(row, BroadcastTo(first, v.shape()), "EQ");
  Value pivot = KeepDims(SumOver(Select(pivot_mask, v, ConstantLike(0, v)), {rows_dim}), v.shape(),
                         {rows_dim});
  Value pivot_abs = Abs(pivot);
  Value usable = Compare(pivot_abs, ConstantLike(0, pivot_abs), "GT");
  Value phase = Select(
      usable, Div(Conjugate(pivot), AbsComplex(Select(usable, pivot, ConstantLike(1, pivot)))),
      ConstantLike(1, pivot));
  Value scale = Select(Compare(norms, ConstantLike(0, norms), "GT"), norms, ConstantLike(1, norms));
  Value normalized = Div(Mul(v, BroadcastTo(phase, v.shape())),
                         Convert(BroadcastTo(scale, v.shape()), DType::kC64));
  Value real_pivot =
      Convert(Div(BroadcastTo(pivot_abs, v.shape()), BroadcastTo(scale, v.shape())), DType::kC64);
  return Select(pivot_mask, real_pivot, normalized);
}

// ---- the ops ----

struct Eigen {
  Value values;   // (*, n) complex64
  Value vectors;  // (*, n, n) complex64, unset without compute_vectors
};

// x (*, ...) with every entry of the matrices where `keep` (*) is false made NaN: inputs LAPACK
// refuses (infs or NaNs: the CPU raises, a host read) or on which the iteration did not converge
// (the CPU raises from geev's info).
Value NanUnless(const Value& x, const Value& keep) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < keep.rank(); ++d) dims.push_back(d);
  Value nan =
      MakeComplex(Constant(std::numeric_limits<double>::quiet_NaN(), DType::kF32, x.shape()),
                  Constant(std::numeric_limits<double>::quiet_NaN(), DType::kF32, x.shape()));
  return Select(BroadcastInDim(keep, x.shape(), dims), x, nan);
}

Eigen Eig(const Value& input, bool compute_vectors) {
  const int64_t rows_dim = input.rank() - 2, columns_dim = input.rank() - 1;
  Value a = Convert(input, DType::kC64);
  // Scaled so its largest entry has magnitude 1 (eigenvalues scale back; eigenvectors do not
  // change), as LAPACK's geev scales matrices far from 1.
  Value magnitude = Abs(a);
  Value largest =
      Reduce(magnitude, {rows_dim, columns_dim}, "stablehlo.maximum", Constant(0, DType::kF32));
  // Every entry finite (|NaN| < inf is false; a maximum may drop a NaN, so not from `largest`).
  Value finite = Reduce(
      Compare(magnitude, ConstantLike(std::numeric_limits<double>::infinity(), magnitude), "LT"),
      {rows_dim, columns_dim}, "stablehlo.and", ir::IntegerConstant(1, DType::kBool));
  Value usable = And(finite, Compare(largest, ConstantLike(0, largest), "GT"));
  Value scale = Select(usable, largest, ConstantLike(1, largest));
  a = Div(a, Convert(BroadcastTo(PerMatrix(scale), a.shape()), DType::kC64));
  Hessenberg hessenberg = ReduceToHessenberg(a);
  Schur schur = QrIteration(hessenberg.h, hessenberg.q);
  Value keep = And(finite, schur.converged);
  Value values = Mul(DiagonalOf(schur.t, 0),
                     Convert(Reshape(scale, WithLast(BatchOf(a.shape()), 1)), DType::kC64));
  Eigen eigen{NanUnless(values, keep), Value()};
  if (compute_vectors) {
    Value vectors = NormalizeColumns(MatMul(schur.z, TriangularEigenvectors(schur.t)));
    eigen.vectors = NanUnless(vectors, keep);
  }
  return eigen;
}

// The CPU's kernels (LAPACK's geev) exist for float32, float64, complex64 and complex128; float64
// never gets here, its complex128 outputs being refused first (tpu has no complex128).
void CheckEigDtype(DType dtype) {
  if (dtype != DType::kC64) CheckFloatOrDoubleKernel("linalg_eig_out_cpu", dtype);
}

// linalg_eig(self) -> (eigenvalues, eigenvectors).
std::vector<Value> EigLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckEigDtype(a.dtype());
  if (Columns(a) == 0) {
    return {Constant(0, ctx.output(0).dtype, ctx.output(0).shape),
            Constant(0, ctx.output(1).dtype, ctx.output(1).shape)};
  }
  Eigen eigen = Eig(a, true);
  return {eigen.values, eigen.vectors};
}

// _linalg_eigvals(self) -> eigenvalues.
std::vector<Value> EigvalsLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckEigDtype(a.dtype());
  if (Columns(a) == 0) return {Constant(0, ctx.output(0).dtype, ctx.output(0).shape)};
  return {Eig(a, false).values};
}

LoweringRegistrar registrar({
    {"linalg_eig", EigLowering},
    {"_linalg_eigvals", EigvalsLowering},
    {"linalg_eigvals", EigvalsLowering},  // its out= form, which tpu's _linalg_eigvals calls
});

}  // namespace
}  // namespace torch_tpu::ops
