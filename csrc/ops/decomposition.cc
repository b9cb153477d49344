// Matrix decompositions and solves, batched over leading dims: Cholesky (stablehlo.cholesky),
// triangular solves (stablehlo.triangular_solve) and LU with partial pivoting, a stablehlo.while
// over the columns (so compile time does not grow with n), with the solves, inverse and
// determinants built on it. As on the CPU (LAPACK), f32, f64 and complex64 have kernels; for
// complex, transposes in the factorizations are conjugate transposes (A = L L^H).
//
// `info` outputs follow LAPACK: potrf's order of the first leading minor that is not positive
// definite, getrf's index of the first zero pivot (both 1-based, 0 for success). Ops whose CPU
// kernels raise from info (check_errors=True) need a host read; the public ops call
// _linalg_check_errors on the info these return.
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/matrix.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

void RejectCheckErrors(const LoweringContext& ctx, size_t index) {
  if (ctx.bool_arg(index)) {
    throw UnsupportedError("check_errors=True reads info on the host; call " + ctx.name +
                           " with check_errors=False and check info");
  }
}

// LAPACK's types: f32, f64 and complex64 (the complex dtype this backend has).
void CheckLapackKernel(const std::string& kernel, DType dtype) {
  if (dtype != DType::kC64) CheckFloatOrDoubleKernel(kernel, dtype);
}

// ---- matrix helpers (the shared ones are in ops/matrix.h) ----

// The diagonal of each matrix (square or not), shape (*, min(m, n)). Selected-out entries and
// the sum start as -0, so the sum is exactly the diagonal entry (a -0 stays -0).
Value Diagonal(const Value& x) {
  const int64_t k = std::min(Rows(x), Columns(x));
  Value square = Slice(x, std::vector<int64_t>(x.rank(), 0), WithMatrix(BatchOf(x.shape()), k, k),
                       std::vector<int64_t>(x.rank(), 1));
  Value negative_zero = Constant(-0.0, x.dtype());
  Value entries = Select(TriangleMask(square.shape(), true),
                         Select(TriangleMask(square.shape(), false), square,
                                BroadcastTo(negative_zero, square.shape())),
                         BroadcastTo(negative_zero, square.shape()));
  return Reduce(entries, {square.rank() - 1}, "stablehlo.add", negative_zero);
}

// ---- loops ----
//
// Loop bodies work on per-matrix row indices (each matrix of a batch pivots on its own rows), so
// they move rows with masks rather than dynamic slices; j, the column, is shared.

// Row `row` (s32, shape (*)) of each matrix of x (*, m, c), as (*, 1, c). Exact: the one
// selected entry plus -0s (0s for integers).
Value TakeRows(const Value& x, const Value& row) {
  const int64_t rows_dim = x.rank() - 2;
  Value row_index = RowIndex(x.shape());
  Value selected = Compare(row_index, PerMatrix(row), "EQ");
  Value neutral = ir::IsFloating(x.dtype()) ? Constant(-0.0, x.dtype()) : Constant(0, x.dtype());
  Value sum = Reduce(Select(selected, x, BroadcastTo(neutral, x.shape())), {rows_dim},
                     "stablehlo.add", neutral);
  return KeepDims(sum, x.shape(), {rows_dim});
}

// Swaps row j (0-d s32) with row p (s32, per matrix, shape (*)) of each matrix of x (*, m, c).
Value SwapRows(const Value& x, const Value& j, const Value& p) {
  const int64_t rows_dim = x.rank() - 2;
  Value row_j = DynamicSliceAt(x, rows_dim, j, 1);
  Value row_p = TakeRows(x, p);
  Value row_index = RowIndex(x.shape());
  Value at_p = Compare(row_index, PerMatrix(p), "EQ");
  return Select(Compare(row_index, j, "EQ"), row_p, Select(at_p, row_j, x));
}

// ---- Cholesky ----

// potrf's info for the matrices flagged in `failed` (*): the first column whose pivot is not
// positive (NaN included) in an unblocked right-looking elimination of A's lower triangle. Runs
// only when some matrix is flagged.
Value CholeskyInfo(const Value& a, const Value& failed) {
  const int64_t n = Columns(a), rows_dim = a.rank() - 2, columns_dim = a.rank() - 1;
  const Shape batch = BatchOf(a.shape());
  Value symmetric = Select(TriangleMask(a.shape(), true), a, Adjoint(a));
  Value any_failed = AnyOf(failed);
  auto step = [&](const Value& j, const std::vector<Value>& v) {
    const Value& x = v[1];
    Value column = DynamicSliceAt(x, columns_dim, j, 1);   // (*, n, 1)
    Value pivot = DynamicSliceAt(column, rows_dim, j, 1);  // (*, 1, 1)
    // potrf reads the real part of a complex pivot.
    Value real_pivot = Real(pivot);
    Value positive = Reshape(Compare(real_pivot, ConstantLike(0, real_pivot), "GT"), batch);
    Value first = And(Compare(v[2], S32(0), "EQ"), Not(positive));
    Value info = Select(first, Add(j, Constant(1, DType::kS32)), v[2]);
    Value row_index = RowIndex(x.shape());
    Value column_index = ColumnIndex(x.shape());
    Value root = Sqrt(real_pivot);
    if (ir::IsComplex(x.dtype())) root = MakeComplex(root, ConstantLike(0, root));
    Value l = Div(column, root);
    Value trailing = And(Compare(row_index, j, "GT"), Compare(column_index, j, "GT"));
    Value updated = Select(trailing, Sub(x, Mul(l, Adjoint(l))), x);
    return std::vector<Value>{v[0], updated, info};
  };
  Value info = ForLoop(n, {any_failed, symmetric, Constant(0, DType::kS32, batch)}, step, true)[2];
  return Select(failed, info, Constant(0, DType::kS32, batch));
}

// L with A = L L^H from A's lower triangle, the upper triangle zero, and potrf's info. XLA's
// expansion of stablehlo.cholesky fills the whole factor with NaN when A is not positive
// definite, so a matrix whose factor has a diagonal entry that is not positive gets its info
// from CholeskyInfo (its L stays NaN, where LAPACK leaves a partial factor).
struct CholeskyFactor {
  Value factor, info;
};

CholeskyFactor Cholesky(const Value& a) {
  Value l = ir::MakeOp("stablehlo.cholesky", {a}, a.type(), "lower = true");
  l = Triangle(l, true);
  Value diagonal = Real(Diagonal(l));  // real for complex A too
  Value positive = Compare(diagonal, ConstantLike(0, diagonal), "GT");
  Value failed = Not(Reduce(positive, {diagonal.rank() - 1}, "stablehlo.and",
                            ir::IntegerConstant(1, DType::kBool)));
  return {l, CholeskyInfo(a, failed)};
}

// linalg_cholesky_ex(self, *, upper, check_errors) -> (L, info). upper reads A's upper triangle
// and returns U = L^H.
std::vector<Value> CholeskyExLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("cholesky_cpu", a.dtype());
  RejectCheckErrors(ctx, 2);
  const bool upper = ctx.bool_arg(1);
  if (Columns(a) == 0) {
    return {Constant(0, a.dtype(), ctx.output(0).shape),
            Constant(0, DType::kS32, ctx.output(1).shape)};
  }
  CholeskyFactor cholesky = Cholesky(upper ? Adjoint(a) : a);
  return {upper ? Adjoint(cholesky.factor) : cholesky.factor, cholesky.info};
}

// ---- triangular solves ----

// linalg_solve_triangular(self, B, *, upper, left, unitriangular).
std::vector<Value> SolveTriangularLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  CheckLapackKernel("triangular_solve_cpu", t);
  Value x = TriangularSolve(ctx.value(0, t), ctx.value(1, t), ctx.bool_arg(3, true),
                            !ctx.bool_arg(2), ctx.bool_arg(4), false);
  return {BroadcastTo(x, ctx.output().shape)};
}

// triangular_solve(self=B, A, upper, transpose, unitriangular) -> (solution, A broadcast).
// `transpose` is a plain transpose for complex A too, as on the CPU (trsm's 'T').
std::vector<Value> TriangularSolveLowering(LoweringContext& ctx) {
  const DType t = ctx.output(0).dtype;
  CheckLapackKernel("triangular_solve_cpu", t);
  Value b = ctx.value(0, t), a = ctx.value(1, t);
  Value x = TriangularSolve(a, b, true, !ctx.bool_arg(2, true), ctx.bool_arg(4), ctx.bool_arg(3));
  return {BroadcastTo(x, ctx.output(0).shape), BroadcastTo(a, ctx.output(1).shape)};
}

// X with (L L^H) X = B, or (U^H U) X = B: two triangular solves.
Value CholeskySolve(const Value& factor, const Value& b, bool upper) {
  Value y = TriangularSolve(factor, b, true, !upper, false, upper, true);
  return TriangularSolve(factor, y, true, !upper, false, !upper, true);
}

// _cholesky_solve_helper(self=B, A, upper), batch dims already broadcast by cholesky_solve.
std::vector<Value> CholeskySolveHelperLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  CheckLapackKernel("cholesky_solve_cpu", t);
  return {CholeskySolve(ctx.value(1, t), ctx.value(0, t), ctx.bool_arg(2))};
}

// cholesky_inverse(self, upper): (L L^H)^-1, or (U^H U)^-1.
std::vector<Value> CholeskyInverseLowering(LoweringContext& ctx) {
  Value factor = ctx.tensor(0);
  CheckLapackKernel("cholesky_inverse_out_cpu", factor.dtype());
  return {CholeskySolve(factor, Identity(factor.dtype(), factor.shape()), ctx.bool_arg(1))};
}

// ---- LU with partial pivoting ----
struct LuFactors {
  Value lu;           // (*, m, n): L below the diagonal (unit diagonal implied), U on and above
  Value pivots;       // (*, k) s32, 1-based: row j was swapped with row pivots[j] - 1
  Value permutation;  // (*, m) s32: row i of P^T A is row permutation[i] of A
  Value info;         // (*) s32
};

// getrf's right-looking elimination, one column per iteration: the pivot is the first row at or
// below j of largest |value| (|re| + |im| for complex, as i?amax measures), NaNs never chosen over
// a number, its row swapped into place; a zero pivot sets info and leaves the column unscaled, as
// LAPACK does.
LuFactors LuFactor(const Value& a) {
  const Shape batch = BatchOf(a.shape());
  const int64_t m = Rows(a), n = Columns(a), k = std::min(m, n);
  const int64_t rows_dim = a.rank() - 2, columns_dim = a.rank() - 1;
  const Shape pivots_shape = WithLast(batch, k), permutation_shape = WithLast(batch, m);
  Value pivots = Constant(0, DType::kS32, pivots_shape);
  Value permutation = Iota(TensorType{DType::kS32, permutation_shape}, rows_dim);
  Value info = Constant(0, DType::kS32, batch);
  if (k == 0) return {a, pivots, permutation, info};
  auto step = [&](const Value& j, const std::vector<Value>& v) {
    const Value& x = v[0];
    const DType t = x.dtype();
    Value row_index = RowIndex(x.shape());
    Value column_index = ColumnIndex(x.shape());
    // Pivot search over column j's rows at or below j.
    Value column = DynamicSliceAt(x, columns_dim, j, 1);  // (*, m, 1)
    Value column_rows = RowIndex(column.shape());
    Value magnitude = ir::IsComplex(t) ? Add(Abs(Real(column)), Abs(Imag(column))) : Abs(column);
    Value eligible = Compare(column_rows, j, "GE");
    Value candidate =
        Select(And(eligible, Not(IsNan(magnitude))), magnitude, ConstantLike(-1, magnitude));
    Value largest = KeepDims(
        Reduce(candidate, {rows_dim}, "stablehlo.maximum", Constant(-1, magnitude.dtype())),
        candidate.shape(), {rows_dim});
    Value at_largest = And(eligible, Compare(candidate, largest, "EQ"));
    Value pivot_row =
        Reduce(Select(at_largest, column_rows, Constant(m, DType::kS32)), {rows_dim, columns_dim},
               "stablehlo.minimum", Constant(m, DType::kS32));  // (*)
    Value swapped = SwapRows(x, j, pivot_row);
    Value permuted =
        Reshape(SwapRows(Reshape(v[2], WithMatrix(batch, m, 1)), j, pivot_row), permutation_shape);
    // Elimination below the pivot.
    Value pivot_column = DynamicSliceAt(swapped, columns_dim, j, 1);   // (*, m, 1)
    Value pivot_row_values = DynamicSliceAt(swapped, rows_dim, j, 1);  // (*, 1, n)
    Value pivot = DynamicSliceAt(pivot_column, rows_dim, j, 1);        // (*, 1, 1)
    Value nonzero = Compare(pivot, Constant(0, t), "NE");
    Value multipliers = Select(nonzero, Div(pivot_column, pivot), pivot_column);
    Value below = Compare(row_index, j, "GT");
    Value updated = Select(And(below, Compare(column_index, j, "GT")),
                           Sub(swapped, Mul(multipliers, pivot_row_values)),
                           Select(And(below, Compare(column_index, j, "EQ")),
                                  BroadcastTo(multipliers, x.shape()), swapped));
    Value pivot_position = Iota(TensorType{DType::kS32, pivots_shape}, rows_dim);
    Value new_pivots =
        Select(Compare(pivot_position, j, "EQ"),
               Reshape(Add(pivot_row, Constant(1, DType::kS32)), WithLast(batch, 1)), v[1]);
    Value first_zero = And(Compare(v[3], S32(0), "EQ"), Reshape(Not(nonzero), batch));
    Value new_info = Select(first_zero, Add(j, Constant(1, DType::kS32)), v[3]);
    return std::vector<Value>{updated, new_pivots, permuted, new_info};
  };
  std::vector<Value> results = ForLoop(k, {a, pivots, permutation, info}, step);
  return {results[0], results[1], results[2], results[3]};
}

// Applies the row swaps of `pivots` (*, k) to b (*, n, c): in order (P^T b), or in reverse (P b).
Value ApplyPivots(const Value& b, const Value& pivots, bool reverse) {
  const int64_t k = pivots.shape().back();
  if (k == 0 || ir::NumElements(b.shape()) == 0) return b;
  const Shape batch = BatchOf(b.shape());
  auto step = [&](const Value& j, const std::vector<Value>& v) {
    Value row = reverse ? Sub(S32(k - 1), j) : j;
    Value target = Sub(Reshape(DynamicSliceAt(v[1], v[1].rank() - 1, row, 1), batch),
                       Constant(1, DType::kS32));
    return std::vector<Value>{SwapRows(v[0], row, target), v[1]};
  };
  return ForLoop(k, {b, pivots}, step)[0];
}

// X with A X = B (left) or X A = B, or with A^H in place of A (adjoint), for A = P L U given as
// getrf's (LU, pivots); batch dims broadcast. X A = B is A^H X^H = B^H.
Value LuSolve(Value lu, Value pivots, Value b, bool left, bool adjoint) {
  if (!left) return Adjoint(LuSolve(lu, pivots, Adjoint(b), true, !adjoint));
  const int64_t n = Rows(lu);
  const Shape batch = BroadcastShapes(BatchOf(lu.shape()), BatchOf(b.shape()));
  lu = BroadcastTo(lu, WithMatrix(batch, n, n));
  pivots = BroadcastTo(pivots, WithLast(batch, n));
  b = BroadcastTo(b, WithMatrix(batch, n, Columns(b)));
  if (!adjoint) {
    Value y = TriangularSolve(lu, ApplyPivots(b, pivots, false), true, true, true, false);
    return TriangularSolve(lu, y, true, false, false, false);
  }
  // A^H = U^H L^H P^T.
  Value z = TriangularSolve(lu, b, true, false, false, true, true);
  return ApplyPivots(TriangularSolve(lu, z, true, true, true, true, true), pivots, true);
}

void CheckPivoting(const LoweringContext& ctx, size_t index) {
  if (!ctx.bool_arg(index, true)) {
    throw std::runtime_error("linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  }
}

// linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info).
std::vector<Value> LuFactorExLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("lu_cpu", a.dtype());
  CheckPivoting(ctx, 1);
  RejectCheckErrors(ctx, 2);
  LuFactors factors = LuFactor(a);
  return {factors.lu, factors.pivots, factors.info};
}

// (P, L, U) with A = P L U from getrf's LU (*, m, n) and its row permutation (*, m): L is
// m x k with a unit diagonal, U k x n. An output of no elements (lu_unpack without
// unpack_data/unpack_pivots) stays empty.
std::vector<Value> UnpackLu(const LoweringContext& ctx, const Value& lu, const Value& permutation) {
  const int64_t rank = lu.rank();
  const int64_t m = Rows(lu), k = std::min(m, Columns(lu));
  const DType t = lu.dtype();
  const Shape batch = BatchOf(lu.shape());
  std::vector<Value> results;
  if (ir::NumElements(ctx.output(0).shape) == 0) {
    results.push_back(Constant(0, t, ctx.output(0).shape));
  } else {
    // P[r, c] = 1 where row c of P^T A is row r of A.
    Value rows = RowIndex(WithMatrix(batch, m, m));
    Value columns = Reshape(permutation, WithMatrix(batch, 1, m));
    results.push_back(Convert(Compare(rows, columns, "EQ"), t));
  }
  if (ir::NumElements(ctx.output(1).shape) == 0) {
    results.push_back(Constant(0, t, ctx.output(1).shape));
    results.push_back(Constant(0, t, ctx.output(2).shape));
    return results;
  }
  Value l_part = SliceAxis(lu, rank - 1, 0, k);
  results.push_back(Add(Triangle(l_part, true, -1), Identity(t, l_part.shape())));
  results.push_back(Triangle(SliceAxis(lu, rank - 2, 0, k), false));
  return results;
}

// linalg_lu(A, *, pivot) -> (P, L, U).
std::vector<Value> LuLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("lu_cpu", a.dtype());
  CheckPivoting(ctx, 1);
  LuFactors factors = LuFactor(a);
  return UnpackLu(ctx, factors.lu, factors.permutation);
}

// lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots) -> (P, L, U): the permutation
// replays the pivots' row swaps on the row indices.
std::vector<Value> LuUnpackLowering(LoweringContext& ctx) {
  Value lu = ctx.tensor(0);
  Value pivots = Convert(ctx.tensor(1), DType::kS32);
  const Shape column = WithMatrix(BatchOf(lu.shape()), Rows(lu), 1);
  Value rows = ApplyPivots(RowIndex(column), pivots, false);
  return UnpackLu(ctx, lu, Reshape(rows, WithLast(BatchOf(lu.shape()), Rows(lu))));
}

// linalg_lu_solve(LU, pivots, B, *, left, adjoint).
std::vector<Value> LuSolveLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  CheckLapackKernel("linalg.lu_solve_cpu", t);
  Value x = LuSolve(ctx.value(0, t), ctx.tensor(1), ctx.value(2, t), ctx.bool_arg(3, true),
                    ctx.bool_arg(4));
  return {BroadcastTo(x, ctx.output().shape)};
}

// _linalg_det and _linalg_slogdet on the CPU factor A^T rather than A when A is contiguous (it
// saves a copy into LAPACK's column-major layout; the determinant is the same), and their
// backward formulas solve with the LU they return assuming so: follow A's layout. Complex A is
// factored as it is.
LuFactors FactorForDeterminant(const LoweringContext& ctx) {
  const Value& a = ctx.tensor(0);
  return LuFactor(ctx.arg(0).contiguous && !ir::IsComplex(a.dtype()) ? MatrixTranspose(a) : a);
}

// _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots, info). B is a batch of
// vectors when it is 1-D or has A's shape without its last dim.
std::vector<Value> SolveExLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("lu_cpu", a.dtype());
  RejectCheckErrors(ctx, 3);
  Value b = ctx.value(1, a.dtype());
  const Shape vector_batch(a.shape().begin(), a.shape().end() - 1);
  const bool vector_case = b.rank() == 1 || b.shape() == vector_batch;
  if (vector_case) b = Reshape(b, WithLast(b.shape(), 1));
  LuFactors factors = LuFactor(a);
  Value x = LuSolve(factors.lu, factors.pivots, b, ctx.bool_arg(2, true), false);
  return {Reshape(x, ctx.output(0).shape), factors.lu, factors.pivots, factors.info};
}

// linalg_inv_ex(A, *, check_errors) -> (inverse, info): solve(A, I), as the CPU computes it.
std::vector<Value> InvExLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("lu_cpu", a.dtype());
  RejectCheckErrors(ctx, 1);
  LuFactors factors = LuFactor(a);
  Value x = LuSolve(factors.lu, factors.pivots, Identity(a.dtype(), a.shape()), true, false);
  return {x, factors.info};
}

// det(P) = (-1)^(number of pivots that swap), in dtype.
Value PermutationSign(const Value& pivots, DType dtype) {
  const TensorType positions{DType::kS32, pivots.shape()};
  Value position = Add(Iota(positions, pivots.rank() - 1), Constant(1, DType::kS32));
  Value swaps = Reduce(Convert(Compare(pivots, position, "NE"), DType::kS32), {pivots.rank() - 1},
                       "stablehlo.add", Constant(0, DType::kS32));
  Value odd = Compare(Binary("stablehlo.and", swaps, Constant(1, DType::kS32)),
                      Constant(0, DType::kS32), "NE");
  return Select(odd, Constant(-1, dtype), Constant(1, dtype));
}

// _linalg_det(A) -> (det, LU, pivots): det(P) times the product of U's diagonal.
std::vector<Value> DetLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("lu_cpu", a.dtype());
  LuFactors factors = FactorForDeterminant(ctx);
  Value diagonal = Diagonal(factors.lu);
  Value product =
      Reduce(diagonal, {diagonal.rank() - 1}, "stablehlo.multiply", Constant(1, a.dtype()));
  return {Mul(PermutationSign(factors.pivots, a.dtype()), product), factors.lu, factors.pivots};
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots).
std::vector<Value> SlogdetLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("lu_cpu", a.dtype());
  LuFactors factors = FactorForDeterminant(ctx);
  Value diagonal = Diagonal(factors.lu);
  const int64_t last = diagonal.rank() - 1;
  Value unit = Unary("stablehlo.sign", diagonal);
  if (ir::IsComplex(a.dtype())) {
    // sgn as PyTorch computes it: z / |z|, 0 at 0.
    Value magnitude = Abs(diagonal);
    unit = Select(Compare(diagonal, ConstantLike(0, diagonal), "EQ"), ConstantLike(0, diagonal),
                  Div(diagonal, MakeComplex(magnitude, ConstantLike(0, magnitude))));
  }
  Value signs = Reduce(unit, {last}, "stablehlo.multiply", Constant(1, a.dtype()));
  Value magnitude = Abs(diagonal);  // real for complex A
  Value logabsdet = Reduce(Log(magnitude), {last}, "stablehlo.add", Constant(0, magnitude.dtype()));
  return {Mul(PermutationSign(factors.pivots, a.dtype()), signs), logabsdet, factors.lu,
          factors.pivots};
}

LoweringRegistrar registrar({
    {"linalg_cholesky_ex", CholeskyExLowering},
    {"linalg_solve_triangular", SolveTriangularLowering},
    {"triangular_solve", TriangularSolveLowering},
    {"_cholesky_solve_helper", CholeskySolveHelperLowering},
    {"cholesky_inverse", CholeskyInverseLowering},
    {"linalg_lu_factor_ex", LuFactorExLowering},
    {"linalg_lu", LuLowering},
    {"lu_unpack", LuUnpackLowering},
    {"linalg_lu_solve", LuSolveLowering},
    {"_linalg_solve_ex", SolveExLowering},
    {"linalg_inv_ex", InvExLowering},
    {"_linalg_det", DetLowering},
    {"_linalg_slogdet", SlogdetLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
