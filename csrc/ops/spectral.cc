// Spectral decompositions and the matrix exponential, batched over leading dims. Each iterates
// inside the program with stablehlo.while, so the program's size does not grow with n:
//
// - _linalg_eigh: cyclic Jacobi with the parallel (round-robin) ordering. Each iteration applies
//   one round's n/2 disjoint rotations at once as J^H A J, until the off-diagonal part is below
//   eps relative to A (or a sweep cap).
// - _linalg_svd: one-sided (Hestenes) Jacobi on the taller orientation: the same rounds rotate
//   pairs of columns of W = A V until they are orthogonal, so the singular values come from
//   column norms with high relative accuracy (no A^T A squaring of the condition number).
// - linalg_matrix_exp: scaling and squaring of the Taylor polynomial through x^19 / 19!, scaled
//   under the thresholds PyTorch's CPU kernel uses for its degree-18 approximant.
//
// eigh and svd take f32, f64 and complex64, as the CPU (LAPACK) takes the real and complex types.
// A complex pair rotates by J = D R D^H, R the real rotation for |a_pq| and D = diag(1, e^{-i phi})
// the phase of a_pq = |a_pq| e^{i phi}: the same rounds then give a Hermitian matrix's
// eigenvectors, or a complex matrix's singular vectors. Vectors are unique only up to a phase per
// column (a sign for real ones), and LAPACK normalizes none: tpu's phases are Jacobi's own.
#include "ops/spectral.h"

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

// ---- matrix helpers (the shared ones are in ops/matrix.h) ----

// Full-precision batched matmul: the iterations below must not lose bits to a fast precision mode.
Value MatMul(const Value& a, const Value& b) {
  std::vector<int64_t> batch;
  for (int64_t d = 0; d + 2 < a.rank(); ++d) batch.push_back(d);
  return DotGeneral(a, b, batch, batch, {a.rank() - 1}, {b.rank() - 2}, a.dtype(), true);
}

Value SumLast(const Value& x) {
  return Reduce(x, {x.rank() - 1}, "stablehlo.add", Constant(0, x.dtype()));
}

// The diagonal of each square matrix, (*, n).
Value Diagonal(const Value& x) {
  return SumLast(Select(DiagonalMask(x.shape()), x, ConstantLike(0, x)));
}

// |x|^2, real (f32 for complex64).
Value SquaredMagnitude(const Value& x) {
  if (!ir::IsComplex(x.dtype())) return Mul(x, x);
  return Add(Mul(Real(x), Real(x)), Mul(Imag(x), Imag(x)));
}

// (a + a^H) / 2: rounding's asymmetry removed, and a real diagonal.
Value Hermitize(const Value& a) { return Mul(Add(a, Adjoint(a)), ConstantLike(0.5, a)); }

Value MaxOf(const Value& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.rank(); ++d) dims.push_back(d);
  return Reduce(x, dims, "stablehlo.maximum", S32(0));
}

// The largest |entry| of each matrix (real), or 1 where that is 0 or not finite: dividing by it
// keeps the sums of squares below from overflowing or underflowing, at the cost of one rounding.
Value ScaleOf(const Value& a) {
  Value magnitude = Abs(a);
  Value largest = Reduce(magnitude, {a.rank() - 2, a.rank() - 1}, "stablehlo.maximum",
                         Constant(0, magnitude.dtype()));
  Value usable =
      And(Compare(largest, ConstantLike(0, largest), "GT"),
          Compare(largest, ConstantLike(std::numeric_limits<double>::max(), largest), "LE"));
  return PerMatrix(Select(usable, largest, ConstantLike(1, largest)));
}

// (*) true for the matrices of a (*, m, n) whose entries are all finite.
Value AllFinite(const Value& a) {
  Value magnitude = Abs(a);
  Value finite =
      Compare(magnitude, ConstantLike(std::numeric_limits<double>::infinity(), magnitude), "LT");
  return Reduce(finite, {a.rank() - 2, a.rank() - 1}, "stablehlo.and",
                ir::IntegerConstant(1, DType::kBool));
}

// x (*, ...) with every entry of the matrices that are not `finite` (*) made NaN. LAPACK fails
// on those (the CPU raises from its info, a host read); NaN results say so inside the program,
// where the loops, whose comparisons are false for NaN, would otherwise leave finite garbage.
Value NanUnlessFinite(const Value& x, const Value& finite) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < finite.rank(); ++d) dims.push_back(d);
  Value mask = BroadcastInDim(finite, x.shape(), dims);
  return Select(mask, x, ConstantLike(std::numeric_limits<double>::quiet_NaN(), x));
}

double Epsilon(DType dtype) {  // of the real or complex type
  return dtype == DType::kF64 ? std::numeric_limits<double>::epsilon()
                              : std::numeric_limits<float>::epsilon();
}

// Reorders the columns of x (*, r, n) by `order` (*, n) (s64): column j of the result is column
// order[j] of x. A matmul with a permutation matrix, exact (one nonzero product per sum).
Value PermuteColumns(const Value& x, const Value& order) {
  const int64_t n = Columns(x);
  const Shape shape = WithMatrix(BatchOf(x.shape()), n, n);
  Value rows = Iota(TensorType{DType::kS64, shape}, static_cast<int64_t>(shape.size()) - 2);
  Value targets = BroadcastTo(Reshape(order, WithMatrix(BatchOf(x.shape()), 1, n)), shape);
  return MatMul(x, Convert(Compare(rows, targets, "EQ"), x.dtype()));
}

// ---- Jacobi rotations ----
//
// One round of the round-robin ordering pairs the indices as players of a tournament of N (n
// rounded up to even) players, player N - 1 fixed and the others rotating, so every pair meets
// once in N - 1 rounds and a round's rotations touch disjoint rows and columns: they commute and
// apply at once, each row or column mixing with its partner's only (O(n^2) work a round). An
// index paired with the padding player (N - 1 >= n) sits the round out.
struct Round {
  Value partner;  // (n) s32: each index's partner, itself when it sits out
  Value lower;    // (n) bool: the index is the p (smaller) of its pair (p, q)
  Value paired;   // (n) bool
};

Round RoundPairs(int64_t n, const Value& round) {
  const int64_t last = n + n % 2 - 1;
  Value index = Iota(TensorType{DType::kS32, {n}}, 0);
  // Player i < N - 1 meets 2 round - i (mod N - 1), except player `round`, who meets N - 1.
  Value mirrored =
      Binary("stablehlo.remainder", Add(Sub(Mul(S32(2), round), index), S32(last)), S32(last));
  Value partner =
      Select(Compare(index, S32(last), "EQ"), BroadcastTo(round, {n}),
             Select(Compare(index, round, "EQ"), BroadcastTo(S32(last), {n}), mirrored));
  Value paired = Compare(partner, S32(n), "LT");
  return {Select(paired, partner, index), Compare(index, partner, "LT"), paired};
}

// x[..., partner[j]] for every j: a gather along the last dim.
Value TakePartners(const Value& x, const Value& partner) {
  const int64_t rank = x.rank(), n = Columns(x);
  std::vector<int64_t> offset_dims;
  for (int64_t d = 0; d + 1 < rank; ++d) offset_dims.push_back(d);
  Shape slice = x.shape();
  slice.back() = 1;
  const std::string axis = ir::I64List({rank - 1});
  return ir::MakeOp(
      "stablehlo.gather", {x, Reshape(partner, {n, 1})}, x.type(),
      "dimension_numbers = #stablehlo.gather<offset_dims = " + ir::I64List(offset_dims) +
          ", collapsed_slice_dims = " + axis + ", start_index_map = " + axis +
          ", index_vector_dim = 1>, slice_sizes = " + ir::I64Array(slice));
}

// J's entries by row: J[i, i] = cosine[i] (real), J[i, partner(i)] = off[i], both (*, n); and
// the (real) change of each diagonal entry of J^H a J, -t |a_pq| for p and t |a_pq| for q. J is
// unitary with J[q, p] = -conj(J[p, q]).
struct Rotation {
  Value cosine, off, shift;
};

// Golub & Van Loan's symmetric Schur rotation of every pair, from the real diagonal d (*, n) and
// each index's a[i, partner(i)] (*, n, zero where it sits out): J^H a J is zero at (p, q). Row q
// takes row p's a_pq, so both rows compute their common rotation from the same values in the same
// order and J is unitary to rounding. A complex a_pq rotates as its magnitude, between its phases.
Rotation RealSchurRotation(const Round& round, const Value& lower, const Value& d,
                           const Value& a_pq) {
  Value partner_d = TakePartners(d, round.partner);
  Value a_pp = Select(lower, d, partner_d), a_qq = Select(lower, partner_d, d);
  Value one = ConstantLike(1, d), zero = ConstantLike(0, d);
  Value tau = Div(Sub(a_qq, a_pp), Mul(ConstantLike(2, d), a_pq));
  Value sign = Select(Compare(tau, zero, "GE"), one, Neg(one));
  Value tangent = Div(sign, Add(Abs(tau), Sqrt(Add(one, Mul(tau, tau)))));
  Value idle = Or(Not(BroadcastTo(round.paired, d.shape())), Compare(a_pq, zero, "EQ"));
  tangent = Select(idle, zero, tangent);
  Value cosine = Rsqrt(Add(one, Mul(tangent, tangent)));
  Value sine = Mul(tangent, cosine);
  Value shift = Mul(tangent, a_pq);
  // J[p, q] = s, J[q, p] = -s.
  return {cosine, Select(lower, sine, Neg(sine)), Select(lower, Neg(shift), shift)};
}

Rotation SchurRotation(const Round& round, const Value& d, Value a_pq) {
  Value lower = BroadcastTo(round.lower, d.shape());
  a_pq = Select(lower, a_pq, TakePartners(a_pq, round.partner));
  if (!ir::IsComplex(a_pq.dtype())) return RealSchurRotation(round, lower, d, a_pq);
  Value magnitude = Abs(a_pq);
  Rotation rotation = RealSchurRotation(round, lower, d, magnitude);
  // e^{i phi} = a_pq / |a_pq| (1 where a_pq = 0): J[p, q] = s e^{i phi}, J[q, p] = -s e^{-i phi}.
  Value zero = Compare(magnitude, ConstantLike(0, magnitude), "EQ");
  Value divisor = Select(zero, ConstantLike(1, magnitude), magnitude);
  Value phase = Select(zero, ConstantLike(1, a_pq), Div(a_pq, Convert(divisor, a_pq.dtype())));
  rotation.off = Mul(Convert(rotation.off, a_pq.dtype()), Select(lower, phase, Conjugate(phase)));
  return rotation;
}

// x J for x (*, r, n): column j becomes cosine[j] x[:, j] - conj(off[j]) x[:, partner(j)], since
// J[partner(j), j] = -conj(J[j, partner(j)]).
Value RotateColumns(const Value& x, const Round& round, const Rotation& rotation) {
  const Shape row = WithMatrix(BatchOf(x.shape()), 1, Columns(x));
  Value cosine = BroadcastTo(Reshape(Convert(rotation.cosine, x.dtype()), row), x.shape());
  Value off = BroadcastTo(Reshape(Conjugate(rotation.off), row), x.shape());
  return Sub(Mul(x, cosine), Mul(TakePartners(x, round.partner), off));
}

// The number of rounds of one sweep (every pair once).
int64_t RoundsPerSweep(int64_t n) { return std::max<int64_t>(n + n % 2 - 1, 1); }
// Jacobi converges quadratically (typically 5 to 10 sweeps); the cap only bounds the loop for
// inputs whose rounding keeps it from reaching the tolerance.
constexpr int64_t kMaxSweeps = 40;

// ---- eigh ----

// True for the matrices whose off-diagonal Frobenius norm is above eps times their norm.
Value EighUnconverged(const Value& a) {
  Value squares = SquaredMagnitude(a);
  Value off = Select(DiagonalMask(a.shape()), ConstantLike(0, squares), squares);
  const std::vector<int64_t> matrix{a.rank() - 2, a.rank() - 1};
  Value off_sum = Reduce(off, matrix, "stablehlo.add", Constant(0, squares.dtype()));
  Value total = Reduce(squares, matrix, "stablehlo.add", Constant(0, squares.dtype()));
  const double eps = Epsilon(a.dtype());
  return Compare(off_sum, Mul(total, ConstantLike(eps * eps, total)), "GT");
}

struct Eigen {
  Value values;   // (*, n), ascending, real
  Value vectors;  // (*, n, n), columns
};

// One round on a Hermitian a with eigenvectors v: a <- J^H a J, v <- v J.
std::vector<Value> EighRound(const Value& a, const Value& v, const Value& round_index) {
  const int64_t n = Columns(a);
  Round round = RoundPairs(n, round_index);
  Value column = ColumnIndex(a.shape());
  Value row = RowIndex(a.shape());
  Value partner = BroadcastInDim(round.partner, a.shape(), {a.rank() - 2});
  Value pairs = And(Compare(column, partner, "EQ"), Compare(column, row, "NE"));
  Value zero = ConstantLike(0, a);
  Value d = Real(Diagonal(a));
  Rotation rotation = SchurRotation(round, d, SumLast(Select(pairs, a, zero)));
  Value rotated = RotateColumns(a, round, rotation);
  rotated = Adjoint(RotateColumns(Adjoint(rotated), round, rotation));
  // The rotated pairs are zero in exact arithmetic; their rounding would only slow convergence.
  // The diagonal takes Rutishauser's update a_pp - t a_pq, whose rounding is relative to the
  // (shrinking) correction rather than to a_pp and a_qq, as the two-sided product's is.
  const Shape column_shape = WithMatrix(BatchOf(a.shape()), Columns(a), 1);
  Value diagonal =
      BroadcastTo(Reshape(Convert(Add(d, rotation.shift), a.dtype()), column_shape), a.shape());
  rotated = Select(DiagonalMask(a.shape()), diagonal, Select(pairs, zero, rotated));
  rotated = Hermitize(rotated);
  return {rotated, RotateColumns(v, round, rotation)};
}

// Jacobi on a Hermitian a (*, n, n), n >= 1.
Eigen JacobiEigh(const Value& a) {
  const int64_t n = Columns(a), rounds = RoundsPerSweep(n);
  Value scale = ScaleOf(a);
  std::vector<Value> initial{S32(0), Hermitize(Div(a, Convert(scale, a.dtype()))),
                             Identity(a.dtype(), a.shape())};
  auto condition = [&](const std::vector<Value>& v) {
    return And(Compare(v[0], S32(kMaxSweeps * rounds), "LT"), AnyOf(EighUnconverged(v[1])));
  };
  auto body = [&](const std::vector<Value>& v) {
    std::vector<Value> next =
        EighRound(v[1], v[2], Binary("stablehlo.remainder", v[0], S32(rounds)));
    return std::vector<Value>{Add(v[0], S32(1)), next[0], next[1]};
  };
  std::vector<Value> result = While(initial, condition, body);
  Sorted sorted = SortAlong(Real(Diagonal(result[1])), a.rank() - 2, false);
  Value finite = AllFinite(a);
  return {
      NanUnlessFinite(Mul(sorted.values, Reshape(scale, WithLast(BatchOf(a.shape()), 1))), finite),
      NanUnlessFinite(PermuteColumns(result[2], sorted.indices), finite)};
}

// LAPACK's kernels: float, double and the complex types (complex64 here).
void CheckLapackKernel(const std::string& kernel, DType dtype) {
  if (!ir::IsComplex(dtype)) CheckFloatOrDoubleKernel(kernel, dtype);
}

Value ZerosOf(const TensorType& type) { return Constant(0, type.dtype, type.shape); }

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors): A is Hermitian, read from its
// lower (UPLO 'L') or upper triangle, its diagonal's imaginary part ignored (as LAPACK's);
// without compute_v the eigenvectors output is empty.
std::vector<Value> EighLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("linalg_eigh_cpu", a.dtype());
  const bool lower = !ctx.has(1) || ctx.string_arg(1) == "L";
  const bool compute_v = ctx.bool_arg(2, true);
  if (Columns(a) == 0) return {ZerosOf(ctx.output(0)), ZerosOf(ctx.output(1))};
  Eigen eigen = JacobiEigh(Select(TriangleMask(a.shape(), lower), a, Adjoint(a)));
  Value vectors = compute_v ? eigen.vectors : ZerosOf(ctx.output(1));
  return {eigen.values, vectors};
}

// ---- SVD ----

// One round of one-sided Jacobi: rotates each pair of columns of w (*, m, n) to orthogonality,
// and v with them. Also says (*) which matrices had a pair whose cosine exceeded the rounding
// that computing it leaves (about m eps): a sweep without one has converged.
std::vector<Value> SvdRound(const Value& w, const Value& v, const Value& round_index) {
  const int64_t rows_dim = w.rank() - 2;
  Round round = RoundPairs(Columns(w), round_index);
  Value d = Reduce(SquaredMagnitude(w), {rows_dim}, "stablehlo.add",
                   Constant(0, Real(w).dtype()));  // squared column norms
  // Each column's w_i^H w_partner(i): a_pq of the Gram matrix W^H W.
  Value products = Reduce(Mul(Conjugate(w), TakePartners(w, round.partner)), {rows_dim},
                          "stablehlo.add", Constant(0, w.dtype()));
  Value a_pq = Select(BroadcastTo(round.paired, d.shape()), products, ConstantLike(0, products));
  const double tolerance = Epsilon(w.dtype()) * static_cast<double>(Rows(w));
  Value bound = Mul(Mul(d, TakePartners(d, round.partner)), ConstantLike(tolerance * tolerance, d));
  Value significant = Reduce(Compare(SquaredMagnitude(a_pq), bound, "GT"), {d.rank() - 1},
                             "stablehlo.or", ir::IntegerConstant(0, DType::kBool));
  Rotation rotation = SchurRotation(round, d, a_pq);
  return {RotateColumns(w, round, rotation), RotateColumns(v, round, rotation), significant};
}

// Fills the zero columns of u (*, m, c), whose other columns are orthonormal, with unit vectors
// orthogonal to every other column: each is the standard basis vector least covered by the
// columns so far (the row of u of smallest norm, so at least 1/m of it survives) with those
// columns projected out twice (classical Gram-Schmidt, repeated for orthogonality to rounding).
Value CompleteOrthonormal(const Value& u) {
  const int64_t m = Rows(u), c = Columns(u), rows_dim = u.rank() - 2, last = u.rank() - 1;
  const Shape batch = BatchOf(u.shape());
  auto body = [&](const std::vector<Value>& v) {
    const Value& j = v[0];
    const Value& x = v[1];
    const Shape column_shape = WithMatrix(batch, m, 1);
    Value column = DynamicSliceAt(x, last, j, 1);
    const DType real = Real(x).dtype();
    Value empty = Compare(SumLast(Reshape(SquaredMagnitude(column), WithLast(batch, m))),
                          Constant(0, real), "EQ");  // (*)
    Value row_norms = SumLast(SquaredMagnitude(x));  // (*, m)
    Value smallest = Reduce(row_norms, {rows_dim}, "stablehlo.minimum",
                            Constant(std::numeric_limits<double>::infinity(), real));
    Value rows = Iota(TensorType{DType::kS32, row_norms.shape()}, rows_dim);
    Value at_smallest = Compare(
        row_norms, BroadcastTo(Reshape(smallest, WithLast(batch, 1)), row_norms.shape()), "EQ");
    Value first = Reduce(Select(at_smallest, rows, BroadcastTo(S32(m), rows.shape())), {rows_dim},
                         "stablehlo.minimum", S32(m));
    Value basis =
        Convert(Compare(rows, BroadcastTo(Reshape(first, WithLast(batch, 1)), rows.shape()), "EQ"),
                x.dtype());
    Value candidate = Reshape(basis, column_shape);
    for (int pass = 0; pass < 2; ++pass) {
      candidate = Sub(candidate, MatMul(x, MatMul(Adjoint(x), candidate)));
    }
    Value norm = Sqrt(
        Reduce(SquaredMagnitude(candidate), {rows_dim, last}, "stablehlo.add", Constant(0, real)));
    candidate = Div(candidate, Convert(PerMatrix(norm), x.dtype()));
    Value columns = ColumnIndex(x.shape());
    Value target = And(Compare(columns, j, "EQ"), BroadcastTo(PerMatrix(empty), x.shape()));
    return std::vector<Value>{Add(j, S32(1)), Select(target, BroadcastTo(candidate, x.shape()), x)};
  };
  auto condition = [&](const std::vector<Value>& v) { return Compare(v[0], S32(c), "LT"); };
  return While({S32(0), u}, condition, body)[1];
}

struct Svd {
  Value u;  // (*, m, m) or (*, m, n); u and v are unset without compute_uv
  Value s;  // (*, n), descending, real
  Value v;  // (*, n, n), columns (not transposed)
};

// One-sided Jacobi on a (*, m, n) with m >= n >= 1: rotate columns of W = A V until orthogonal;
// then S holds their norms and U the normalized columns, completed to an orthonormal set where a
// column is zero (rank deficiency, or full_matrices' extra columns).
Svd TallSvd(const Value& a, bool full_matrices, bool compute_uv) {
  const int64_t m = Rows(a), n = Columns(a), rounds = RoundsPerSweep(n);
  const Shape batch = BatchOf(a.shape());
  Value scale = ScaleOf(a);
  // Carries (round, W, V, a significant rotation this sweep (*), converged).
  Value no = ir::IntegerConstant(0, DType::kBool);
  std::vector<Value> initial{S32(0), Div(a, Convert(scale, a.dtype())),
                             Identity(a.dtype(), WithMatrix(batch, n, n)), BroadcastTo(no, batch),
                             no};
  auto condition = [&](const std::vector<Value>& v) {
    return And(Compare(v[0], S32(kMaxSweeps * rounds), "LT"), Not(v[4]));
  };
  auto body = [&](const std::vector<Value>& v) {
    std::vector<Value> next =
        SvdRound(v[1], v[2], Binary("stablehlo.remainder", v[0], S32(rounds)));
    Value count = Add(v[0], S32(1));
    Value active = Or(v[3], next[2]);
    Value sweep_end = Compare(Binary("stablehlo.remainder", count, S32(rounds)), S32(0), "EQ");
    Value converged = And(sweep_end, Not(AnyOf(active)));
    active =
        Select(BroadcastTo(sweep_end, active.shape()), BroadcastTo(no, active.shape()), active);
    return std::vector<Value>{count, next[0], next[1], active, converged};
  };
  std::vector<Value> result = While(initial, condition, body);
  Value w = result[1];
  Value norms = Sqrt(
      Reduce(SquaredMagnitude(w), {w.rank() - 2}, "stablehlo.add", Constant(0, Real(w).dtype())));
  Sorted sorted = SortAlong(norms, norms.rank() - 1, true);
  Value finite = AllFinite(a);
  Value s = NanUnlessFinite(Mul(sorted.values, Reshape(scale, WithLast(batch, 1))), finite);
  if (!compute_uv) return {Value(), s, Value()};
  w = PermuteColumns(w, sorted.indices);
  Value v = PermuteColumns(result[2], sorted.indices);
  // Columns whose squared norm is not a normal number are zero for U's purposes.
  Value norm_rows = Reshape(sorted.values, WithMatrix(batch, 1, n));
  const double tiny = a.dtype() == DType::kF64 ? std::numeric_limits<double>::min()
                                               : std::numeric_limits<float>::min();
  Value usable = Compare(Mul(norm_rows, norm_rows), ConstantLike(tiny, norm_rows), "GE");
  Value divisor = BroadcastTo(Convert(norm_rows, w.dtype()), w.shape());
  Value u = Select(BroadcastTo(usable, w.shape()), Div(w, divisor), ConstantLike(0, w));
  if (full_matrices && m > n) {
    std::vector<int64_t> low(u.rank(), 0), high(u.rank(), 0), interior(u.rank(), 0);
    high[u.rank() - 1] = m - n;
    u = Pad(u, Constant(0, u.dtype()), low, high, interior);
  }
  return {NanUnlessFinite(CompleteOrthonormal(u), finite), s, NanUnlessFinite(v, finite)};
}

// _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S, Vh). A wide A is factored as its
// adjoint: A^H = U' S V'^H gives U = V', Vh = U'^H.
std::vector<Value> SvdLowering(LoweringContext& ctx) {
  Value a = ctx.tensor(0);
  CheckLapackKernel("linalg_svd_cpu", a.dtype());
  const bool full_matrices = ctx.bool_arg(1, true), compute_uv = ctx.bool_arg(2, true);
  const int64_t m = Rows(a), n = Columns(a);
  const DType t = a.dtype();
  if (std::min(m, n) == 0) {
    auto empty_or_identity = [&](size_t i) {
      const Shape& shape = ctx.output(i).shape;
      return ir::NumElements(shape) == 0 ? Constant(0, t, shape) : Identity(t, shape);
    };
    return {empty_or_identity(0), ZerosOf(ctx.output(1)), empty_or_identity(2)};
  }
  const bool wide = m < n;
  Svd svd = TallSvd(wide ? Adjoint(a) : a, full_matrices, compute_uv);
  if (!compute_uv) return {ZerosOf(ctx.output(0)), svd.s, ZerosOf(ctx.output(2))};
  if (wide) return {svd.v, svd.s, Adjoint(svd.u)};
  return {svd.u, svd.s, Adjoint(svd.v)};
}

// ---- matrix exponential ----

// The largest norm the degree-18 Taylor polynomial takes without scaling: PyTorch's thresholds
// (Bader, Blanes and Casas) for its degree-18 approximant, in double and in float.
double TaylorThreshold(DType dtype) {
  return dtype == DType::kF64 ? 1.090863719290036 : 3.010066362817634;
}

// sum_{k <= 19} x^k / k! by Paterson-Stockmeyer: blocks of four terms in I, X, X^2, X^3, combined
// by Horner's rule in X^4 (7 matmuls instead of 18).
Value TaylorPolynomial(const Value& x) {
  std::vector<double> coefficients{1};
  for (int k = 1; k < 20; ++k) coefficients.push_back(coefficients.back() / k);
  Value x2 = MatMul(x, x);
  std::vector<Value> powers{Identity(x.dtype(), x.shape()), x, x2, MatMul(x2, x)};
  Value x4 = MatMul(x2, x2);
  auto block = [&](int j) {
    Value sum = Mul(powers[0], ConstantLike(coefficients[4 * j], x));
    for (int i = 1; i < 4; ++i) {
      sum = Add(sum, Mul(powers[i], ConstantLike(coefficients[4 * j + i], x)));
    }
    return sum;
  };
  Value result = block(4);
  for (int j = 3; j >= 0; --j) result = Add(MatMul(result, x4), block(j));
  return result;
}

// Applies `step` to the matrices of x (*, n, n) steps[b] (*, s32) times each.
template <typename Step>
Value RepeatPerMatrix(const Value& x, const Value& steps, Step&& step) {
  auto condition = [&](const std::vector<Value>& v) { return Compare(v[0], MaxOf(v[2]), "LT"); };
  auto body = [&](const std::vector<Value>& v) {
    Value active = BroadcastTo(PerMatrix(Compare(v[0], v[2], "LT")), v[1].shape());
    return std::vector<Value>{Add(v[0], S32(1)), Select(active, step(v[1]), v[1]), v[2]};
  };
  return While({S32(0), x, steps}, condition, body)[1];
}

// linalg_matrix_exp(self): exp(A) = (T(A / 2^s))^(2^s) with s the fewest halvings that bring A's
// 1-norm under the threshold. f16/bf16 compute in f32 and round once (the CPU's own half kernels
// lose accuracy, and give NaN for norms they must scale).
std::vector<Value> MatrixExpLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  if (ir::NumElements(ctx.output().shape) == 0) return {Constant(0, t, ctx.output().shape)};
  const DType compute = OpMathType(t);
  Value x = Convert(ctx.tensor(0), compute);
  // The 1-norm is real for a complex input too (|x| is f32 there).
  const Value magnitude = Abs(x);
  const DType real = magnitude.dtype();
  Value column_sums = Reduce(magnitude, {x.rank() - 2}, "stablehlo.add", Constant(0, real));
  Value norm =
      Reduce(column_sums, {column_sums.rank() - 1}, "stablehlo.maximum", Constant(0, real));  // (*)
  // ceil(log2(norm / theta)), clamped to [0, enough halvings for the largest finite norm].
  const double cap = compute == DType::kF64 ? 1100 : 160;
  Value halvings =
      Unary("stablehlo.ceil", Div(Log(Div(norm, ConstantLike(TaylorThreshold(compute), norm))),
                                  ConstantLike(std::log(2.0), norm)));
  halvings = Select(IsNan(halvings), ConstantLike(0, norm), halvings);
  halvings = Min(Max(halvings, ConstantLike(0, norm)), ConstantLike(cap, norm));
  Value steps = Convert(halvings, DType::kS32);
  // Halving one step at a time is exact (short of underflow), unlike multiplying by a computed
  // power of two.
  Value scaled =
      RepeatPerMatrix(x, steps, [](const Value& y) { return Mul(y, ConstantLike(0.5, y)); });
  Value result =
      RepeatPerMatrix(TaylorPolynomial(scaled), steps, [](const Value& y) { return MatMul(y, y); });
  return {Convert(result, t)};
}

LoweringRegistrar registrar({
    {"_linalg_eigh", EighLowering},
    {"_linalg_svd", SvdLowering},
    {"linalg_matrix_exp", MatrixExpLowering},
});

}  // namespace

ThinSvd ThinSingularValueDecomposition(const Value& a) {
  if (Rows(a) >= Columns(a)) {
    Svd svd = TallSvd(a, false, true);
    return {svd.u, svd.s, svd.v};
  }
  // a^H = u' s v'^H gives a = v' s u'^H.
  Svd svd = TallSvd(Adjoint(a), false, true);
  return {svd.v, svd.s, svd.u};
}

}  // namespace torch_tpu::ops
