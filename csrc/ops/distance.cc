// Lowerings for p-norm distances between rows: _cdist_forward / _cdist_backward (torch.cdist) and
// _pdist_forward / _pdist_backward (torch.pdist), for p = 0, 1, 2, inf and any other p >= 0.
//
// Distances are computed from the row differences directly for every compute_mode: the CPU's
// matmul form for p = 2 (|x|^2 + |y|^2 - 2 x.y) is the same math with more rounding. Gradients
// use the CPU kernels' formulas. pdist is the upper triangle of cdist(x, x): the pair of rows
// (i, j), i < j, sits at i * n - i * (i + 1) / 2 + j - i - 1, computed on device, so no index
// constant grows with n.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// x1 [batch..., r1, m] and x2 [batch..., r2, m] (batch dims broadcast to `batch`) -> the
// differences x1[i] - x2[j] as [batch..., r1, r2, m].
Value RowDifferences(const Value& x1, const Value& x2, const Shape& batch) {
  const int64_t b = static_cast<int64_t>(batch.size());
  const int64_t r1 = x1.shape()[x1.rank() - 2], r2 = x2.shape()[x2.rank() - 2];
  const int64_t m = x1.shape().back();
  Shape pairs = batch;
  pairs.insert(pairs.end(), {r1, r2, m});
  Shape rows1 = batch, rows2 = batch;
  rows1.insert(rows1.end(), {r1, m});
  rows2.insert(rows2.end(), {r2, m});
  std::vector<int64_t> dims1, dims2;
  for (int64_t i = 0; i < b; ++i) dims1.push_back(i);
  dims2 = dims1;
  dims1.insert(dims1.end(), {b, b + 2});
  dims2.insert(dims2.end(), {b + 1, b + 2});
  return Sub(BroadcastInDim(BroadcastTo(x1, rows1), pairs, dims1),
             BroadcastInDim(BroadcastTo(x2, rows2), pairs, dims2));
}

// The p-norm of `diff` along its last dim. p is a runtime parameter unless it is one of the
// special orders, so a new p does not recompile. A NaN difference makes the norm NaN, except in
// cdist's inf-norm (`nan_ignoring_max`), whose CPU kernel keeps the larger by std::max and so
// passes over a NaN.
Value NormOfDifferences(const LoweringContext& ctx, const Value& diff, const Scalar& p,
                        bool nan_ignoring_max) {
  const double order = p.ToDouble();
  const int64_t last = diff.rank() - 1;
  const Value zero = Constant(0, diff.dtype());
  const Value magnitude = Abs(diff);
  if (order == 0) {
    // A NaN difference counts as NaN, as on the CPU (inf - inf included).
    Value nonzero = Convert(Compare(diff, ConstantLike(0, diff), "NE"), diff.dtype());
    nonzero = Select(IsNan(diff), diff, nonzero);
    return Reduce(nonzero, {last}, "stablehlo.add", zero);
  }
  if (order == 1) return Reduce(magnitude, {last}, "stablehlo.add", zero);
  if (order == 2) return Sqrt(Reduce(Mul(diff, diff), {last}, "stablehlo.add", zero));
  if (std::isinf(order)) {
    // Explicit either way: XLA's maximum propagates NaN, except in some reduces of its CPU
    // backend. The sum of magnitudes is NaN exactly when one of them is.
    const Value numbers = Select(IsNan(magnitude), BroadcastTo(zero, magnitude.shape()), magnitude);
    const Value largest = Reduce(numbers, {last}, "stablehlo.maximum", zero);
    if (nan_ignoring_max) return largest;
    const Value sum = Reduce(magnitude, {last}, "stablehlo.add", zero);
    return Select(IsNan(sum), sum, largest);
  }
  const Value exponent = ctx.ScalarParameter(p, diff.dtype());
  Value sum = Reduce(Binary("stablehlo.power", magnitude, exponent), {last}, "stablehlo.add", zero);
  return Binary("stablehlo.power", sum, Div(Constant(1, diff.dtype()), exponent));
}

Value Sign(const Value& x) { return Unary("stablehlo.sign", x); }

// d dist / d diff for every element of `diff` [..., r1, r2, m], given `dist` [..., r1, r2], as
// the CPU's kernels compute it (zero where the distance is zero).
Value DistanceDerivative(const LoweringContext& ctx, const Value& diff, const Value& dist,
                         const Scalar& p) {
  const double order = p.ToDouble();
  const DType t = diff.dtype();
  std::vector<int64_t> dist_dims;
  for (int64_t i = 0; i < dist.rank(); ++i) dist_dims.push_back(i);
  const Value d = BroadcastInDim(dist, diff.shape(), dist_dims);
  const Value zeros = ConstantLike(0, diff);
  if (order == 1) return Sign(diff);
  // Exactly the coordinates whose |diff| is the maximum.
  if (std::isinf(order)) return Select(Compare(Abs(diff), d, "EQ"), Sign(diff), zeros);
  const Value at_zero = Compare(d, zeros, "EQ");
  if (order == 2) return Select(at_zero, zeros, Div(diff, d));
  const Value exponent = ctx.ScalarParameter(p, t);
  const Value less_one = Sub(exponent, Constant(1, t));
  const Value scale = Binary("stablehlo.power", d, less_one);
  if (order < 2) {
    // sign(diff) |diff|^(p-1) / dist^(p-1); for p < 1 a zero difference gives zero, not inf.
    Value skip = at_zero;
    if (order < 1) skip = Or(skip, Compare(diff, zeros, "EQ"));
    Value g = Div(Mul(Sign(diff), Binary("stablehlo.power", Abs(diff), less_one)), scale);
    return Select(skip, zeros, g);
  }
  // diff |diff|^(p-2) / dist^(p-1)
  const Value less_two = Sub(exponent, Constant(2, t));
  Value g = Div(Mul(diff, Binary("stablehlo.power", Abs(diff), less_two)), scale);
  return Select(at_zero, zeros, g);
}

// The gradient of x1's rows: sum over j of grad[i, j] * d dist(i, j) / d x1[i]. (x2's gradient
// is this with the arguments swapped, as autograd calls it.)
Value CdistBackward(const LoweringContext& ctx, const Value& grad, const Value& x1, const Value& x2,
                    const Scalar& p, const Value& dist, const Shape& batch) {
  if (p.ToDouble() == 0) {  // the count of differing coordinates is locally constant
    Shape rows = batch;
    rows.insert(rows.end(), {x1.shape()[x1.rank() - 2], x1.shape().back()});
    return Constant(0, x1.dtype(), rows);
  }
  const Value diff = RowDifferences(x1, x2, batch);
  const int64_t r2_axis = diff.rank() - 2;
  std::vector<int64_t> grad_dims;
  for (int64_t i = 0; i < grad.rank(); ++i) grad_dims.push_back(i);
  const Value terms =
      Mul(DistanceDerivative(ctx, diff, dist, p), BroadcastInDim(grad, diff.shape(), grad_dims));
  return Reduce(terms, {r2_axis}, "stablehlo.add", Constant(0, diff.dtype()));
}

Shape BatchOf(const Shape& matrices) { return Shape(matrices.begin(), matrices.end() - 2); }

// _cdist_forward(x1, x2, p, compute_mode)
std::vector<Value> CdistForwardLowering(LoweringContext& ctx) {
  const Value x1 = ctx.tensor(0), x2 = ctx.tensor(1);
  CheckFloatOrDoubleKernel("cdist", x1.dtype());
  // The meta function checks the range with another message; this is the CPU's.
  const int64_t mode = ctx.int_arg(3, 0);
  if (mode < 0 || mode > 2) {
    throw std::runtime_error("possible modes: 0, 1, 2, but was: " + std::to_string(mode));
  }
  const TensorType& out = ctx.output();
  const Value diff = RowDifferences(x1, x2, BatchOf(out.shape));
  return {NormOfDifferences(ctx, diff, ctx.scalar(2), /*nan_ignoring_max=*/true)};
}

// _cdist_backward(grad, x1, x2, p, cdist) -> the gradient of x1, batch dims broadcast.
std::vector<Value> CdistBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x1 = ctx.tensor(1), x2 = ctx.tensor(2);
  CheckFloatOrDoubleKernel("cdist_backward", x1.dtype());
  const TensorType& out = ctx.output();
  const Shape batch = BatchOf(out.shape);
  Shape grid = batch;
  grid.insert(grid.end(), {x1.shape()[x1.rank() - 2], x2.shape()[x2.rank() - 2]});
  return {CdistBackward(ctx, BroadcastTo(grad, grid), x1, x2, ctx.scalar(3),
                        BroadcastTo(ctx.tensor(4), grid), batch)};
}

// For each (i, j) of an n x n grid: the position of the pair (min, max) in pdist's
// row-major upper triangle (meaningless on the diagonal).
Value PairIndex(int64_t n) {
  const TensorType grid{DType::kS64, {n, n}};
  const Value row = Iota(grid, 0), column = Iota(grid, 1);
  const Value i = Min(row, column), j = Max(row, column);
  const Value one = ir::IntegerConstant(1, DType::kS64), two = ir::IntegerConstant(2, DType::kS64);
  const Value first_of_row =
      Sub(Mul(i, ir::IntegerConstant(n, DType::kS64)), Div(Mul(i, Add(i, one)), two));
  return Add(first_of_row, Sub(Sub(j, i), one));
}

Value UpperTriangle(const Value& grid) {
  const TensorType index{DType::kS64, grid.shape()};
  return Compare(Iota(index, 0), Iota(index, 1), "LT");
}

// _pdist_forward(self, p): the distances of the pairs of rows i < j, in row-major order. The
// upper triangle of the full distance grid is scattered into place; other entries fall out of
// range (index `pairs`) and are dropped.
std::vector<Value> PdistForwardLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckFloatOrDoubleKernel("pdist", x.dtype());
  const int64_t n = x.shape()[0];
  const int64_t pairs = ctx.output().shape[0];
  const Value dist =
      NormOfDifferences(ctx, RowDifferences(x, x, {}), ctx.scalar(1), /*nan_ignoring_max=*/false);
  const Value position = Select(UpperTriangle(dist), PairIndex(n),
                                Constant(static_cast<double>(pairs), DType::kS64, {n, n}));
  const TensorType scalar{x.dtype(), {}};
  auto keep_update = ir::MakeRegion(
      {scalar, scalar}, [](const std::vector<Value>& a) { return std::vector<Value>{a[1]}; });
  return {ir::MakeMultiOp(
      "stablehlo.scatter",
      {Constant(0, x.dtype(), {pairs}), Reshape(position, {n * n, 1}), Reshape(dist, {n * n})},
      {TensorType{x.dtype(), {pairs}}},
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true",
      {std::move(keep_update)})[0]};
}

// Each pair's value at both (i, j) and (j, i) of an n x n grid; zero on the diagonal.
Value SymmetricGrid(const Value& pair_values, int64_t n) {
  const TensorType grid{pair_values.dtype(), {n, n}};
  const Value taken = ir::MakeOp(
      "stablehlo.gather", {pair_values, Reshape(PairIndex(n), {n, n, 1})}, grid,
      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
      "index_vector_dim = 2>, slice_sizes = array<i64: 1>");
  const TensorType index{DType::kS64, {n, n}};
  return Select(Compare(Iota(index, 0), Iota(index, 1), "EQ"), ir::Full(0, grid), taken);
}

// _pdist_backward(grad, self, p, pdist): the pair (i, j) adds grad * d dist / d x_i to row i and
// the negation (the derivative of the swapped difference) to row j, so row i's gradient is the
// cdist gradient of x against itself with the pair values spread symmetrically.
std::vector<Value> PdistBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x = ctx.tensor(1), dist = ctx.tensor(3);
  CheckFloatOrDoubleKernel("pdist_backward", x.dtype());
  const int64_t n = x.shape()[0];
  if (n < 2) return {ConstantLike(0, x)};
  return {
      CdistBackward(ctx, SymmetricGrid(grad, n), x, x, ctx.scalar(2), SymmetricGrid(dist, n), {})};
}

LoweringRegistrar registrar({
    {"_cdist_forward", CdistForwardLowering},
    {"_cdist_backward", CdistBackwardLowering},
    {"_pdist_forward", PdistForwardLowering},
    {"_pdist_backward", PdistBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
