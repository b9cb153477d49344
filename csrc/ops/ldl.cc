// linalg_ldl_factor_ex and linalg_ldl_solve for real f32/f64: LAPACK's unblocked sytf2 (lower,
// Bunch-Kaufman diagonal pivoting, alpha = (1 + sqrt(17)) / 8) and sytrs, as stablehlo.while
// loops. The CPU calls sytrf, whose blocked panels make sytf2's pivot choices; reproducing its
// comparisons makes the pivots (1-based, negative for 2x2 blocks, LAPACK's compact LD) the CPU's.
// A zero that only cancellation produces may come out as a tiny residue (or the reverse), so
// info for such matrices can differ from the CPU's BLAS (which may fuse multiply-adds).
//
// Each matrix of a batch takes its own 1x1 or 2x2 steps, so the factorization carries a column
// per matrix and moves rows with masks; the solves run over a shared index with a per-matrix flag
// that skips the second column of a 2x2 block.
#include <cmath>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// Sums that select one entry start from -0, so they return it exactly (a -0 stays -0).
Value NegativeZero(DType dtype) { return Constant(-0.0, dtype); }

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

// sytf2 with uplo = 'L' on each matrix's lower triangle.
LdlFactors LdlFactor(const Value& a) {
  const DType t = a.dtype();
  const int64_t n = Rows(a), rank = a.rank();
  const Shape batch = BatchOf(a.shape());
  const Value alpha = Constant((1 + std::sqrt(17.0)) / 8, t);
  const Value zero = Constant(0, t), one = Constant(1, t), minus_one = Constant(-1, t);
  const Value one_s32 = Constant(1, DType::kS32);
  auto step = [&](const Value& /*iteration*/, const std::vector<Value>& v) {
    const Value &x = v[0], &k = v[1], &pivots = v[2], &info = v[3];
    Value active = Compare(k, S32(n), "LT");
    Value rows = RowIndex(x.shape()), columns = ColumnIndex(x.shape());
    Value k_index = PerMatrix(k);
    // Pivot search: the largest entry below the diagonal in column k (idamax: the first).
    Value column = ColumnAt(x, k);
    Value column_rows = RowIndex(column.shape());
    Value absakk = Abs(EntryAt(x, k, k));
    Value below = Compare(column_rows, k_index, "GT");
    Value magnitude = Abs(column);
    Value candidate = Select(And(below, Not(IsNan(magnitude))), magnitude,
                             BroadcastTo(minus_one, magnitude.shape()));
    Value largest = Reduce(candidate, {rank - 2, rank - 1}, "stablehlo.maximum", minus_one);
    Value imax = Reduce(Select(And(below, Compare(candidate, PerMatrix(largest), "EQ")),
                               column_rows, Constant(n, DType::kS32, column_rows.shape())),
                        {rank - 2, rank - 1}, "stablehlo.minimum", Constant(n, DType::kS32));
    Value colmax = Max(largest, zero);
    Value singular = Or(Compare(Max(absakk, colmax), zero, "EQ"), IsNan(absakk));
    // rowmax: the largest off-diagonal entry of row imax within the trailing submatrix.
    Value imax_index = PerMatrix(imax);
    Value row = RowAt(x, imax);
    Value row_columns = ColumnIndex(row.shape());
    Value symmetric_row =
        Select(Compare(row_columns, imax_index, "LT"), row, MatrixTranspose(ColumnAt(x, imax)));
    Value in_row = And(Compare(row_columns, k_index, "GE"), Compare(row_columns, imax_index, "NE"));
    Value rowmax = Reduce(Select(in_row, Abs(symmetric_row), BroadcastTo(minus_one, row.shape())),
                          {rank - 2, rank - 1}, "stablehlo.maximum", minus_one);
    Value alpha_colmax = Mul(alpha, colmax);
    Value keep_k = Or(Compare(absakk, alpha_colmax, "GE"),
                      Compare(absakk, Mul(alpha_colmax, Div(colmax, rowmax)), "GE"));
    Value one_by_one =
        Compare(Abs(EntryAt(x, imax, imax)), Mul(alpha, rowmax), "GE");  // pivot imax alone
    Value two = And(Not(singular), Not(Or(keep_k, one_by_one)));
    Value kp = Select(Or(singular, keep_k), k, imax);
    Value kk = Add(k, Convert(two, DType::kS32));
    // Interchange rows and columns kk and kp of the trailing submatrix (its lower triangle).
    Value full = Select(Compare(rows, columns, "GE"), x, MatrixTranspose(x));
    Value permuted = MatrixTranspose(SwapRowsAt(MatrixTranspose(SwapRowsAt(full, kk, kp)), kk, kp));
    Value trailing = And(And(Compare(rows, k_index, "GE"), Compare(columns, k_index, "GE")),
                         Compare(rows, columns, "GE"));
    Value factoring = And(active, Not(singular));
    Value swapped = Select(And(trailing, PerMatrix(factoring)), permuted, x);
    // 1x1 pivot: A22 -= d11 x x^T (dsyr with -d11), then x *= d11.
    Value c = ColumnAt(swapped, k);
    Value d11 = Div(one, EntryAt(swapped, k, k));
    Value below_k = Compare(column_rows, k_index, "GT");
    Value x_below = Select(below_k, c, BroadcastTo(zero, c.shape()));
    Value temp = Mul(PerMatrix(Neg(d11)), MatrixTranspose(x_below));
    Value after_k = And(Compare(rows, k_index, "GT"), Compare(columns, k_index, "GT"));
    Value lower_trailing = And(after_k, Compare(rows, columns, "GE"));
    Value column_k = And(Compare(columns, k_index, "EQ"), Compare(rows, k_index, "GT"));
    Value single = Select(lower_trailing, Add(swapped, Mul(x_below, temp)),
                          Select(column_k, Mul(PerMatrix(d11), c), swapped));
    // 2x2 pivot on columns k, k+1.
    Value k1 = Add(k, one_s32);
    Value c1 = ColumnAt(swapped, k1);
    Value d21 = EntryAt(swapped, k1, k);
    Value e11 = Div(EntryAt(swapped, k1, k1), d21);
    Value e22 = Div(EntryAt(swapped, k, k), d21);
    Value scale = Div(Div(one, Sub(Mul(e11, e22), one)), d21);
    Value wk = Mul(PerMatrix(scale), Sub(Mul(PerMatrix(e11), c), c1));
    Value wkp1 = Mul(PerMatrix(scale), Sub(Mul(PerMatrix(e22), c1), c));
    Value k1_index = PerMatrix(k1);
    Value rows_after = Compare(rows, k1_index, "GT");
    Value after_pair =
        And(And(rows_after, Compare(columns, k1_index, "GT")), Compare(rows, columns, "GE"));
    Value pair_update =
        Sub(Sub(swapped, Mul(c, MatrixTranspose(wk))), Mul(c1, MatrixTranspose(wkp1)));
    Value is_k = Compare(columns, k_index, "EQ"), is_k1 = Compare(columns, k1_index, "EQ");
    Value pair =
        Select(after_pair, pair_update,
               Select(And(rows_after, is_k), BroadcastTo(wk, x.shape()),
                      Select(And(rows_after, is_k1), BroadcastTo(wkp1, x.shape()), swapped)));
    Value updated =
        PerMatrixSelect(And(factoring, two), pair, PerMatrixSelect(factoring, single, swapped));
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
              {a, Constant(0, DType::kS32, batch), Constant(0, DType::kS32, WithLast(batch, n)),
               Constant(0, DType::kS32, batch)},
              step);
  return {Triangle(results[0], true), results[2], results[3]};
}

// linalg_ldl_factor_ex(self, *, hermitian, check_errors) -> (LD, pivots, info). For real
// matrices hermitian changes nothing.
std::vector<Value> LdlFactorExLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckFloatOrDoubleKernel("ldl_factor_kernel_cpu", a.dtype());
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
  LdlFactors f = LdlFactor(a);
  return {f.ld, f.pivots, f.info};
}

// sytrs with uplo = 'L': X with A X = B for A = L D L^T given as sytf2's (LD, pivots).
Value LdlSolve(const Value& ld_value, const Value& pivots_value, const Value& b) {
  const int64_t n = Rows(ld_value), rank = ld_value.rank();
  const Shape batch = BatchOf(ld_value.shape());
  const DType t = ld_value.dtype();
  const Value one = Constant(1, t);
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
    Value scaled =
        Select(Compare(rows, i, "EQ"),
               BroadcastTo(Mul(s_i, Div(one, entry_at(s, i, i))), x.shape()), eliminated);
    // 2x2 block at (i, i+1).
    Value q = SwapRowsAt(x, batch_of(i1), Sub(Neg(p), one_s32));
    Value q_i = row_at(q, i), q_i1 = row_at(q, i1);
    Value ci1 = column_at(s, i1);
    Value q2 =
        Select(Compare(rows, i1, "GT"), Add(Add(q, Mul(ci, Neg(q_i))), Mul(ci1, Neg(q_i1))), q);
    Value akm1k = entry_at(s, i1, i);
    Value akm1 = Div(entry_at(s, i, i), akm1k), ak = Div(entry_at(s, i1, i1), akm1k);
    Value denom = Sub(Mul(akm1, ak), one);
    Value bkm1 = Div(q_i, akm1k), bk = Div(q_i1, akm1k);
    Value new_i = Div(Sub(Mul(ak, bkm1), bk), denom);
    Value new_i1 = Div(Sub(Mul(akm1, bk), bkm1), denom);
    Value paired = Select(Compare(rows, i, "EQ"), BroadcastTo(new_i, x.shape()),
                          Select(Compare(rows, i1, "EQ"), BroadcastTo(new_i1, x.shape()), q2));
    Value next = PerMatrixSelect(single, scaled, PerMatrixSelect(pair, paired, x));
    return std::vector<Value>{next, pair, s.ld, s.pivots};
  };
  Value no_skip = Compare(Constant(0, DType::kS32, batch), Constant(1, DType::kS32), "EQ");
  Value y = ForLoop(n, {b, no_skip, ld_value, pivots_value}, forward)[0];
  // Backward: L^T P^T x = y, from the last column.
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
    auto dot = [&](const Value& column) {  // (*, 1, nrhs): column[i+1:]^T x[i+1:]
      return KeepDims(SumOver(Mul(column, x_below), {rank - 2}), x.shape(), {rank - 2});
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
  CheckFloatOrDoubleKernel("ldl_solve_kernel_cpu", t);
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
  return {LdlSolve(ld, pivots, b)};
}

LoweringRegistrar registrar({
    {"linalg_ldl_factor_ex", LdlFactorExLowering},
    {"linalg_ldl_solve", LdlSolveLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
