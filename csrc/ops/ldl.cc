// linalg_ldl_factor_ex and linalg_ldl_solve for f32/f64/complex64: LAPACK's unblocked sytf2
// (lower, Bunch-Kaufman diagonal pivoting, alpha = (1 + sqrt(17)) / 8) and sytrs, as
// stablehlo.while loops. The CPU calls sytrf, whose blocked panels make sytf2's pivot choices;
// reproducing its comparisons makes the pivots (1-based, negative for 2x2 blocks, LAPACK's compact
// LD) the CPU's. For complex input the CPU calls zsytrf/zsytrs (A = L D L^T) unless hermitian,
// then zhetrf/zhetrs (A = L D L^H): one implementation takes `conjugate` for the latter (false
// for reals, where hermitian changes nothing). Both complex routines rank pivots by
// CABS1(z) = |Re z| + |Im z|, izamax's measure; hetf2 reads only the real part of the diagonal and
// keeps D's diagonal real.
// A zero that only cancellation produces may come out as a tiny residue (or the reverse), so
// info for such matrices can differ from the CPU's BLAS (which may fuse multiply-adds).
//
// Each matrix of a batch takes its own 1x1 or 2x2 steps, so the factorization carries a column
// per matrix and moves rows with masks; the solves run over a shared index with a per-matrix flag
// that skips the second column of a 2x2 block.
#include <cmath>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// Sums that select one entry start from -0, so they return it exactly (a -0 stays -0; for
// complex both parts).
Value NegativeZero(DType dtype) {
  if (!ir::IsComplex(dtype)) return Constant(-0.0, dtype);
  return MakeComplex(Constant(-0.0, DType::kF32), Constant(-0.0, DType::kF32));
}

// The dtype of magnitudes of `dtype`'s entries (f32 for complex64).
DType MagnitudeType(DType dtype) { return ir::IsComplex(dtype) ? DType::kF32 : dtype; }

// LAPACK's pivot measure: CABS1 for complex, |z| for reals.
Value Cabs1(const Value& z) {
  return ir::IsComplex(z.dtype()) ? Add(Abs(Real(z)), Abs(Imag(z))) : Abs(z);
}

// A real value as an entry of `dtype` (imaginary part 0). The Hermitian routines do their scalar
// arithmetic on reals: complex products with a zero imaginary part are exact, complex quotients
// need not be.
Value AsEntry(const Value& real, DType dtype) {
  if (!ir::IsComplex(dtype)) return real;
  return MakeComplex(real, Constant(0, DType::kF32));
}

// x with the imaginary part of each matrix's diagonal dropped (hetf2 sets A(j, j) = DBLE(A(j, j))
// wherever it touches one; the dropped parts never reach another entry).
Value RealDiagonal(const Value& x) {
  return Select(DiagonalMask(x.shape()), AsEntry(Real(x), x.dtype()), x);
}

// The (conjugate) transpose that mirrors the stored lower triangle.
Value Mirror(const Value& x, bool conjugate) { return conjugate ? Adjoint(x) : MatrixTranspose(x); }

// x[r, c] of each matrix for per-matrix indices r, c (*).
Value EntryAt(const Value& x, const Value& r, const Value& c) {
  Value selected = And(Compare(RowIndex(x.shape()), PerMatrix(r), "EQ"),
                       Compare(ColumnIndex(x.shape()), PerMatrix(c), "EQ"));
  Value zero = NegativeZero(x.dtype());
  return Reduce(Select(selected, x, BroadcastTo(zero, x.shape())), {x.rank() - 2, x.rank() - 1},
                "stablehlo.add", zero);
}

// Row r (*) of each matrix as (*, 1, c).
Value RowAt(const Value& x, const Value& r) {
  const int64_t dim = x.rank() - 2;
  Value zero = NegativeZero(x.dtype());
  Value selected = Compare(RowIndex(x.shape()), PerMatrix(r), "EQ");
  return KeepDims(
      Reduce(Select(selected, x, BroadcastTo(zero, x.shape())), {dim}, "stablehlo.add", zero),
      x.shape(), {dim});
}

// Column c (*) of each matrix as (*, m, 1).
Value ColumnAt(const Value& x, const Value& c) {
  return MatrixTranspose(RowAt(MatrixTranspose(x), c));
}

// Swaps rows a and b (*) of each matrix.
Value SwapRowsAt(const Value& x, const Value& a, const Value& b) {
  Value rows = RowIndex(x.shape());
  return Select(Compare(rows, PerMatrix(a), "EQ"), RowAt(x, b),
                Select(Compare(rows, PerMatrix(b), "EQ"), RowAt(x, a), x));
}

Value PerMatrixSelect(const Value& flag, const Value& on_true, const Value& on_false) {
  return Select(PerMatrix(flag), on_true, on_false);
}

struct LdlFactors {
  Value ld, pivots, info;
};

// sytf2 (hetf2 with `conjugate`) with uplo = 'L' on each matrix's lower triangle.
LdlFactors LdlFactor(const Value& a, bool conjugate) {
  const DType t = a.dtype(), r = MagnitudeType(t);
  const int64_t n = Rows(a), rank = a.rank();
  const Shape batch = BatchOf(a.shape());
  const Value alpha = Constant((1 + std::sqrt(17.0)) / 8, r);
  const Value zero = Constant(0, t), one = Constant(1, t);
  const Value zero_r = Constant(0, r), one_r = Constant(1, r), minus_one = Constant(-1, r);
  const Value one_s32 = Constant(1, DType::kS32);
  auto step = [&](const Value& /*iteration*/, const std::vector<Value>& v) {
    const Value &x = v[0], &k = v[1], &pivots = v[2], &info = v[3];
    Value active = Compare(k, S32(n), "LT");
    Value rows = RowIndex(x.shape()), columns = ColumnIndex(x.shape());
    Value k_index = PerMatrix(k);
    // Pivot search: the largest entry below the diagonal in column k (idamax: the first).
    Value column = ColumnAt(x, k);
    Value column_rows = RowIndex(column.shape());
    // With `conjugate` the diagonal is kept real, so CABS1 of it is hetf2's |DBLE(A(k, k))|.
    Value absakk = Cabs1(EntryAt(x, k, k));
    Value below = Compare(column_rows, k_index, "GT");
    Value magnitude = Cabs1(column);
    Value candidate = Select(And(below, Not(IsNan(magnitude))), magnitude,
                             BroadcastTo(minus_one, magnitude.shape()));
    Value largest = Reduce(candidate, {rank - 2, rank - 1}, "stablehlo.maximum", minus_one);
    Value imax = Reduce(Select(And(below, Compare(candidate, PerMatrix(largest), "EQ")),
                               column_rows, Constant(n, DType::kS32, column_rows.shape())),
                        {rank - 2, rank - 1}, "stablehlo.minimum", Constant(n, DType::kS32));
    Value colmax = Max(largest, zero_r);
    Value singular = Or(Compare(Max(absakk, colmax), zero_r, "EQ"), IsNan(absakk));
    // rowmax: the largest off-diagonal entry of row imax within the trailing submatrix.
    Value imax_index = PerMatrix(imax);
    Value row = RowAt(x, imax);
    Value row_columns = ColumnIndex(row.shape());
    Value symmetric_row =
        Select(Compare(row_columns, imax_index, "LT"), row, MatrixTranspose(ColumnAt(x, imax)));
    Value in_row = And(Compare(row_columns, k_index, "GE"), Compare(row_columns, imax_index, "NE"));
    Value rowmax = Reduce(Select(in_row, Cabs1(symmetric_row), BroadcastTo(minus_one, row.shape())),
                          {rank - 2, rank - 1}, "stablehlo.maximum", minus_one);
    Value alpha_colmax = Mul(alpha, colmax);
    Value keep_k = Or(Compare(absakk, alpha_colmax, "GE"),
                      Compare(absakk, Mul(alpha_colmax, Div(colmax, rowmax)), "GE"));
    Value one_by_one =
        Compare(Cabs1(EntryAt(x, imax, imax)), Mul(alpha, rowmax), "GE");  // pivot imax alone
    Value two = And(Not(singular), Not(Or(keep_k, one_by_one)));
    Value kp = Select(Or(singular, keep_k), k, imax);
    Value kk = Add(k, Convert(two, DType::kS32));
    // Interchange rows and columns kk and kp of the trailing submatrix (its lower triangle; hetf2
    // conjugates the entries that cross the diagonal, as mirroring the Hermitian matrix does).
    Value full = Select(Compare(rows, columns, "GE"), x, Mirror(x, conjugate));
    Value permuted = MatrixTranspose(SwapRowsAt(MatrixTranspose(SwapRowsAt(full, kk, kp)), kk, kp));
    Value trailing = And(And(Compare(rows, k_index, "GE"), Compare(columns, k_index, "GE")),
                         Compare(rows, columns, "GE"));
    Value factoring = And(active, Not(singular));
    Value swapped = Select(And(trailing, PerMatrix(factoring)), permuted, x);
    // 1x1 pivot: A22 -= d11 x x^T (syr with -d11; her: x x^H, d11 = 1 / DBLE(A(k, k))), then
    // x *= d11.
    Value c = ColumnAt(swapped, k);
    Value akk = EntryAt(swapped, k, k);
    Value d11 = conjugate ? AsEntry(Div(one_r, Real(akk)), t) : Div(one, akk);
    Value below_k = Compare(column_rows, k_index, "GT");
    Value x_below = Select(below_k, c, BroadcastTo(zero, c.shape()));
    Value temp = Mul(PerMatrix(Neg(d11)), Mirror(x_below, conjugate));
    Value after_k = And(Compare(rows, k_index, "GT"), Compare(columns, k_index, "GT"));
    Value lower_trailing = And(after_k, Compare(rows, columns, "GE"));
    Value column_k = And(Compare(columns, k_index, "EQ"), Compare(rows, k_index, "GT"));
    Value single = Select(lower_trailing, Add(swapped, Mul(x_below, temp)),
                          Select(column_k, Mul(PerMatrix(d11), c), swapped));
    // 2x2 pivot on columns k, k+1. sytf2 scales by d21 = A(k+1, k); hetf2 by its modulus d (in
    // reals, the diagonal read as DBLE), the remaining phase u = d21 / d multiplying column k+1 in
    // wk and conj(u) column k in wkp1.
    Value k1 = Add(k, one_s32);
    Value c1 = ColumnAt(swapped, k1);
    Value d21 = EntryAt(swapped, k1, k);
    Value e11, e22, scale, c1_phased = c1, c_phased = c;
    if (conjugate) {
      Value d = Abs(d21);
      Value e11_r = Div(Real(EntryAt(swapped, k1, k1)), d);
      Value e22_r = Div(Real(EntryAt(swapped, k, k)), d);
      Value scale_r = Div(Div(one_r, Sub(Mul(e11_r, e22_r), one_r)), d);
      e11 = AsEntry(e11_r, t), e22 = AsEntry(e22_r, t), scale = AsEntry(scale_r, t);
      Value u = MakeComplex(Div(Real(d21), d), Div(Imag(d21), d));
      c1_phased = Mul(PerMatrix(u), c1);
      c_phased = Mul(PerMatrix(Conjugate(u)), c);
    } else {
      e11 = Div(EntryAt(swapped, k1, k1), d21);
      e22 = Div(EntryAt(swapped, k, k), d21);
      scale = Div(Div(one, Sub(Mul(e11, e22), one)), d21);
    }
    Value wk = Mul(PerMatrix(scale), Sub(Mul(PerMatrix(e11), c), c1_phased));
    Value wkp1 = Mul(PerMatrix(scale), Sub(Mul(PerMatrix(e22), c1), c_phased));
    Value k1_index = PerMatrix(k1);
    Value rows_after = Compare(rows, k1_index, "GT");
    Value after_pair =
        And(And(rows_after, Compare(columns, k1_index, "GT")), Compare(rows, columns, "GE"));
    Value pair_update =
        Sub(Sub(swapped, Mul(c, Mirror(wk, conjugate))), Mul(c1, Mirror(wkp1, conjugate)));
    Value is_k = Compare(columns, k_index, "EQ"), is_k1 = Compare(columns, k1_index, "EQ");
    Value pair =
        Select(after_pair, pair_update,
               Select(And(rows_after, is_k), BroadcastTo(wk, x.shape()),
                      Select(And(rows_after, is_k1), BroadcastTo(wkp1, x.shape()), swapped)));
    Value updated =
        PerMatrixSelect(And(factoring, two), pair, PerMatrixSelect(factoring, single, swapped));
    if (conjugate) updated = RealDiagonal(updated);
    // Pivots (1-based, negated over both columns of a 2x2 block) and info.
    Value positions = Iota(TensorType{DType::kS32, pivots.shape()}, pivots.rank() - 1);
    Value kp1 = Add(kp, one_s32);
    Value entry = Reshape(Select(two, Neg(kp1), kp1), WithLast(batch, 1));
    Value mine = Or(Compare(positions, Reshape(k, WithLast(batch, 1)), "EQ"),
                    And(Reshape(two, WithLast(batch, 1)),
                        Compare(positions, Reshape(k1, WithLast(batch, 1)), "EQ")));
    Value new_pivots = Select(And(mine, Reshape(active, WithLast(batch, 1))), entry, pivots);
    Value new_info = Select(And(And(active, singular), Compare(info, S32(0), "EQ")), kp1, info);
    Value next_k = Select(active, Add(kk, one_s32), k);
    return std::vector<Value>{updated, next_k, new_pivots, new_info};
  };
  std::vector<Value> results =
      ForLoop(n,
              {conjugate ? RealDiagonal(a) : a, Constant(0, DType::kS32, batch),
               Constant(0, DType::kS32, WithLast(batch, n)), Constant(0, DType::kS32, batch)},
              step);
  return {Triangle(results[0], true), results[2], results[3]};
}

// LAPACK's types: f32, f64 and complex64 (the complex dtype this backend has).
void CheckLdlKernel(const std::string& kernel, DType dtype) {
  if (dtype != DType::kC64) CheckFloatOrDoubleKernel(kernel, dtype);
}

// linalg_ldl_factor_ex(self, *, hermitian, check_errors) -> (LD, pivots, info). For real
// matrices hermitian changes nothing.
std::vector<Value> LdlFactorExLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLdlKernel("ldl_factor_kernel_cpu", a.dtype());
  if (ctx.bool_arg(2)) {
    throw UnsupportedError(
        "check_errors=True reads info on the host; call linalg_ldl_factor_ex with "
        "check_errors=False and check info");
  }
  if (Rows(a) == 0) {
    return {Constant(0, a.dtype(), ctx.output(0).shape),
            Constant(0, DType::kS32, ctx.output(1).shape),
            Constant(0, DType::kS32, ctx.output(2).shape)};
  }
  LdlFactors f = LdlFactor(a, ctx.bool_arg(1) && ir::IsComplex(a.dtype()));
  return {f.ld, f.pivots, f.info};
}

// sytrs with uplo = 'L': X with A X = B for A = L D L^T given as sytf2's (LD, pivots); with
// `conjugate` hetrs for A = L D L^H.
Value LdlSolve(const Value& ld_value, const Value& pivots_value, const Value& b, bool conjugate) {
  const int64_t n = Rows(ld_value), rank = ld_value.rank();
  const Shape batch = BatchOf(ld_value.shape());
  const DType t = ld_value.dtype();
  const Value one = Constant(1, t), one_r = Constant(1, MagnitudeType(t));
  const Value one_s32 = Constant(1, DType::kS32), zero_s32 = Constant(0, DType::kS32);
  // Loop regions read only carried values: v = {x, skip, LD, pivots}.
  struct Step {
    Value ld, pivots, x, rows;
  };
  auto unpack = [&](const std::vector<Value>& v) {
    return Step{v[2], v[3], v[0], RowIndex(v[0].shape())};
  };
  auto pivot_at = [&](const Step& s, const Value& i) {
    return Reshape(DynamicSliceAt(s.pivots, s.pivots.rank() - 1, i, 1), batch);
  };
  auto column_at = [&](const Step& s, const Value& i) {
    return DynamicSliceAt(s.ld, rank - 1, i, 1);
  };
  auto row_at = [&](const Value& x, const Value& i) { return DynamicSliceAt(x, rank - 2, i, 1); };
  auto entry_at = [&](const Step& s, const Value& r, const Value& c) {
    return DynamicSliceAt(DynamicSliceAt(s.ld, rank - 2, r, 1), rank - 1, c, 1);  // (*, 1, 1)
  };
  auto batch_of = [&](const Value& i) { return BroadcastTo(i, batch); };
  // Forward: L D y = P b, one block per step.
  auto forward = [&](const Value& i, const std::vector<Value>& v) {
    Step s = unpack(v);
    const Value &x = s.x, &rows = s.rows;
    Value p = pivot_at(s, i);
    Value start = Not(v[1]);
    Value single = And(start, Compare(p, zero_s32, "GT"));
    Value pair = And(start, Compare(p, zero_s32, "LT"));
    Value i1 = Add(i, one_s32);
    // 1x1 block at i.
    Value swapped = SwapRowsAt(x, batch_of(i), Sub(p, one_s32));
    Value s_i = row_at(swapped, i);
    Value ci = column_at(s, i);
    Value eliminated = Select(Compare(rows, i, "GT"), Add(swapped, Mul(ci, Neg(s_i))), swapped);
    // hetrs divides by DBLE(A(k, k)), whatever imaginary part a given LD holds there.
    Value aii = entry_at(s, i, i);
    Value inverse = conjugate ? AsEntry(Div(one_r, Real(aii)), t) : Div(one, aii);
    Value scaled =
        Select(Compare(rows, i, "EQ"), BroadcastTo(Mul(s_i, inverse), x.shape()), eliminated);
    // 2x2 block at (i, i+1).
    Value q = SwapRowsAt(x, batch_of(i1), Sub(Neg(p), one_s32));
    Value q_i = row_at(q, i), q_i1 = row_at(q, i1);
    Value ci1 = column_at(s, i1);
    Value q2 =
        Select(Compare(rows, i1, "GT"), Add(Add(q, Mul(ci, Neg(q_i))), Mul(ci1, Neg(q_i1))), q);
    // hetrs divides the first row of the block by conj(A(k+1, k)), the second by A(k+1, k).
    Value akm1k = entry_at(s, i1, i);
    Value akm1k_first = conjugate ? Conjugate(akm1k) : akm1k;
    Value akm1 = Div(entry_at(s, i, i), akm1k_first), ak = Div(entry_at(s, i1, i1), akm1k);
    Value denom = Sub(Mul(akm1, ak), one);
    Value bkm1 = Div(q_i, akm1k_first), bk = Div(q_i1, akm1k);
    Value new_i = Div(Sub(Mul(ak, bkm1), bk), denom);
    Value new_i1 = Div(Sub(Mul(akm1, bk), bkm1), denom);
    Value paired = Select(Compare(rows, i, "EQ"), BroadcastTo(new_i, x.shape()),
                          Select(Compare(rows, i1, "EQ"), BroadcastTo(new_i1, x.shape()), q2));
    Value next = PerMatrixSelect(single, scaled, PerMatrixSelect(pair, paired, x));
    return std::vector<Value>{next, pair, s.ld, s.pivots};
  };
  Value no_skip = Compare(Constant(0, DType::kS32, batch), Constant(1, DType::kS32), "EQ");
  Value y = ForLoop(n, {b, no_skip, ld_value, pivots_value}, forward)[0];
  // Backward: L^T P^T x = y (L^H with `conjugate`), from the last column.
  auto backward = [&](const Value& step_index, const std::vector<Value>& v) {
    Step s = unpack(v);
    const Value &x = s.x, &rows = s.rows;
    Value i = Sub(S32(n - 1), step_index);
    Value im1 = Sub(i, one_s32);
    Value p = pivot_at(s, i);
    Value start = Not(v[1]);
    Value single = And(start, Compare(p, zero_s32, "GT"));
    Value pair = And(start, Compare(p, zero_s32, "LT"));
    Value x_below = Select(Compare(rows, i, "GT"), x, BroadcastTo(Constant(0, t), x.shape()));
    auto dot = [&](const Value& column) {  // (*, 1, nrhs): column[i+1:]^T x[i+1:] (or ^H)
      Value mirrored = conjugate ? Conjugate(column) : column;
      return KeepDims(SumOver(Mul(mirrored, x_below), {rank - 2}), x.shape(), {rank - 2});
    };
    Value row_i = Sub(row_at(x, i), dot(column_at(s, i)));
    Value row_im1 = Sub(row_at(x, im1), dot(column_at(s, im1)));
    Value with_i = Select(Compare(rows, i, "EQ"), BroadcastTo(row_i, x.shape()), x);
    Value with_pair = Select(Compare(rows, im1, "EQ"), BroadcastTo(row_im1, x.shape()), with_i);
    Value updated = PerMatrixSelect(pair, with_pair, with_i);
    Value kp = Select(pair, Sub(Neg(p), one_s32), Sub(p, one_s32));
    Value swapped = SwapRowsAt(updated, batch_of(i), kp);
    Value next = PerMatrixSelect(Or(single, pair), swapped, x);
    return std::vector<Value>{next, pair, s.ld, s.pivots};
  };
  return ForLoop(n, {y, no_skip, ld_value, pivots_value}, backward)[0];
}

// linalg_ldl_solve(LD, pivots, B, *, hermitian): batch dims broadcast.
std::vector<Value> LdlSolveLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  CheckLdlKernel("ldl_solve_kernel_cpu", t);
  Value ld = ctx.value(0, t), b = ctx.value(2, t);
  Value pivots = Convert(ctx.tensor(1), DType::kS32);
  const int64_t n = Rows(ld);
  if (n == 0 || ir::NumElements(ctx.output().shape) == 0) {
    return {Constant(0, t, ctx.output().shape)};
  }
  const Shape batch = BatchOf(ctx.output().shape);
  ld = BroadcastTo(ld, WithMatrix(batch, n, n));
  pivots = BroadcastTo(pivots, WithLast(batch, n));
  b = BroadcastTo(b, ctx.output().shape);
  return {LdlSolve(ld, pivots, b, ctx.bool_arg(3) && ir::IsComplex(t))};
}

LoweringRegistrar registrar({
    {"linalg_ldl_factor_ex", LdlFactorExLowering},
    {"linalg_ldl_solve", LdlSolveLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
