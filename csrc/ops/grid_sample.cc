// Lowerings for F.grid_sample: grid_sampler_2d, grid_sampler_3d and their backward ops, with
// modes bilinear, nearest and bicubic (2-D only) and padding zeros, border and reflection.
//
// Every output point reads a few taps of the input (2^d corners, one nearest pixel, or 4x4 for
// bicubic), each a position per spatial axis and a weight. The taps become one gather from the
// input laid out as [N, positions, C]; the input gradient is one scatter-add of the weighted output
// gradient to the same positions. Out-of-range taps are clamped for addressing and masked to zero.
// The arithmetic follows the CPU kernels: the vectorized 2-D one (GridSamplerKernel.cpp) and the
// scalar 3-D one (GridSampler.h), which unnormalize with differently rounded formulas.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

enum Interpolation : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

struct Options {
  int64_t dims = 2;
  Interpolation mode = kBilinear;
  Padding padding = kZeros;
  bool align_corners = false;
};

// A coordinate along one axis and d(coordinate)/d(grid value).
struct Coordinate {
  Value x;
  Value grad;
};

Value Floor(const Value& x) { return Unary("stablehlo.floor", x); }
Value Scalar(double v, const Value& like) { return Constant(v, like.dtype()); }
Value AsFloat(const Value& predicate, const Value& like) {
  return Convert(predicate, like.dtype());
}

// Grid values in [-1, 1] to pixel positions.
Coordinate Unnormalize(const Value& g, int64_t size, const Options& o) {
  const double n = static_cast<double>(size);
  const double scale = o.align_corners ? (n - 1) / 2 : n / 2;
  const Value one = Scalar(1, g);
  Value x;
  if (o.dims == 2) {  // (g + 1) * scale [- 0.5], as the vectorized kernel rounds it
    x = Mul(Add(g, one), Scalar(scale, g));
    if (!o.align_corners) x = Sub(x, Scalar(0.5, g));
  } else if (o.align_corners) {  // ((g + 1) / 2) * (size - 1)
    x = Mul(Div(Add(g, one), Scalar(2, g)), Scalar(n - 1, g));
  } else {  // ((g + 1) * size - 1) / 2
    x = Div(Sub(Mul(Add(g, one), Scalar(n, g)), one), Scalar(2, g));
  }
  return {x, ConstantLike(scale, g)};
}

// Clamps into [0, size - 1] (NaN to 0); the border itself counts as outside for the gradient.
Coordinate Clip(const Coordinate& c, int64_t size) {
  const Value zero = Scalar(0, c.x), top = Scalar(static_cast<double>(size - 1), c.x);
  const Value clipped = Select(IsNan(c.x), ConstantLike(0, c.x), Min(Max(c.x, zero), top));
  const Value inside = And(Compare(c.x, zero, "GT"), Compare(c.x, top, "LT"));
  return {clipped, Mul(c.grad, AsFloat(inside, c.x))};
}

// Reflects into [low, low + span] (the pixel centres, or their outer edges without
// align_corners); the gradient flips sign with each reflection.
Coordinate Reflect(const Coordinate& c, int64_t size, bool align_corners) {
  const double low = align_corners ? 0 : -0.5;
  const double twice_span = align_corners ? 2.0 * (size - 1) : 2.0 * size;
  if (twice_span <= 0) return {ConstantLike(0, c.x), ConstantLike(0, c.x)};
  const Value span2 = Scalar(twice_span, c.x);
  const Value shifted = Sub(c.x, Scalar(low, c.x));
  const Value magnitude = Abs(shifted);
  const Value flips = Floor(Div(magnitude, span2));  // trunc, of a non-negative value
  const Value extra = Sub(magnitude, Mul(flips, span2));
  const Value reflected = Sub(span2, extra);
  const Value more = Compare(extra, reflected, "GT");
  const Value flipped = Binary("stablehlo.xor", more, Compare(shifted, Scalar(0, c.x), "LT"));
  const Value x = Add(Select(more, reflected, extra), Scalar(low, c.x));
  const Value sign = Select(flipped, ConstantLike(-1, c.x), ConstantLike(1, c.x));
  return {x, Mul(c.grad, sign)};
}

// The padding mode applied to a pixel position.
Coordinate ApplyPadding(const Coordinate& c, int64_t size, const Options& o) {
  if (o.padding == kBorder) return Clip(c, size);
  if (o.padding == kReflection) return Clip(Reflect(c, size, o.align_corners), size);
  return c;
}

// One tap per output point: an integral position per spatial axis, its weight and the weight's
// derivative with respect to each axis's pixel coordinate.
struct Tap {
  std::vector<Value> position;
  Value weight;
  std::vector<Value> weight_grad;
};

// Product of `factors` leaving out index `skip` (-1: none).
Value ProductExcept(const std::vector<Value>& factors, int64_t skip) {
  Value product;
  for (int64_t i = 0; i < static_cast<int64_t>(factors.size()); ++i) {
    if (i == skip) continue;
    product = product ? Mul(product, factors[i]) : factors[i];
  }
  return product ? product : ConstantLike(1, factors.at(0));
}

// 2^d corners; coordinates already padded. Axis weights are (x - lo) for the upper corner and
// (1 - (x - lo)) for the lower, as the 2-D kernel forms them.
std::vector<Tap> LinearTaps(const std::vector<Coordinate>& coords) {
  const int64_t d = static_cast<int64_t>(coords.size());
  std::vector<Value> lower, upper_weight, lower_weight;
  for (const Coordinate& c : coords) {
    lower.push_back(Floor(c.x));
    upper_weight.push_back(Sub(c.x, lower.back()));
    lower_weight.push_back(Sub(ConstantLike(1, c.x), upper_weight.back()));
  }
  std::vector<Tap> taps;
  for (int64_t corner = 0; corner < (int64_t{1} << d); ++corner) {
    Tap tap;
    std::vector<Value> factors;
    for (int64_t a = 0; a < d; ++a) {
      const bool up = (corner >> (d - 1 - a)) & 1;
      tap.position.push_back(up ? Add(lower[a], ConstantLike(1, lower[a])) : lower[a]);
      factors.push_back(up ? upper_weight[a] : lower_weight[a]);
    }
    tap.weight = ProductExcept(factors, -1);
    for (int64_t a = 0; a < d; ++a) {
      const bool up = (corner >> (d - 1 - a)) & 1;
      const Value rest = ProductExcept(factors, a);
      tap.weight_grad.push_back(up ? rest : Neg(rest));
    }
    taps.push_back(std::move(tap));
  }
  return taps;
}

std::vector<Tap> NearestTaps(const std::vector<Coordinate>& coords) {
  Tap tap;
  for (const Coordinate& c : coords) {
    // round half to even, as nearbyint and the vectorized round do
    tap.position.push_back(Unary("stablehlo.round_nearest_even", c.x));
    tap.weight_grad.push_back(ConstantLike(0, c.x));
  }
  tap.weight = ConstantLike(1, coords.at(0).x);
  return {tap};
}

// Keys' cubic convolution weights (A = -0.75) of the 4 taps at t in [0, 1), and their
// derivatives in the form the CPU kernels accumulate (subtracted from the gradient).
constexpr double kCubicA = -0.75;

std::vector<Value> CubicWeights(const Value& t) {
  const double a = kCubicA;
  auto near = [&](const Value& x) {  // ((A + 2) x - (A + 3)) x^2 + 1, for |x| <= 1
    Value v = Sub(Mul(Scalar(a + 2, x), x), Scalar(a + 3, x));
    return Add(Mul(Mul(v, x), x), Scalar(1, x));
  };
  auto far = [&](const Value& x) {  // ((A x - 5A) x + 8A) x - 4A, for 1 < |x| < 2
    Value v = Sub(Mul(Scalar(a, x), x), Scalar(5 * a, x));
    return Sub(Mul(Add(Mul(v, x), Scalar(8 * a, x)), x), Scalar(4 * a, x));
  };
  const Value one = Scalar(1, t);
  const Value rest = Sub(one, t);
  return {far(Add(t, one)), near(t), near(rest), far(Add(rest, one))};
}

std::vector<Value> CubicWeightGrads(const Value& t) {
  const double a = kCubicA;
  const Value x0 = Sub(Scalar(-1, t), t), x1 = Neg(t);
  const Value x2 = Sub(Scalar(1, t), t), x3 = Sub(Scalar(2, t), t);
  auto poly = [&](const Value& x, double p2, double p1, double p0) {  // (p2 x + p1) x + p0
    return Add(Mul(Add(Mul(Scalar(p2, x), x), Scalar(p1, x)), x), Scalar(p0, x));
  };
  return {poly(x0, -3 * a, -10 * a, -8 * a), poly(x1, -3 * (a + 2), -2 * (a + 3), 0),
          poly(x2, 3 * (a + 2), -2 * (a + 3), 0), poly(x3, 3 * a, -10 * a, 8 * a)};
}

// 4x4 taps around unnormalized (not yet padded) coordinates; each tap position is padded.
std::vector<Tap> BicubicTaps(const std::vector<Coordinate>& coords, const Shape& sizes,
                             const Options& o) {
  std::vector<Value> base, weights[2], grads[2];
  for (int64_t a = 0; a < 2; ++a) {
    base.push_back(Floor(coords[a].x));
    const Value t = Sub(coords[a].x, base[a]);
    weights[a] = CubicWeights(t);
    grads[a] = CubicWeightGrads(t);
  }
  std::vector<Tap> taps;
  for (int64_t i = 0; i < 4; ++i) {    // along H (axis 0)
    for (int64_t j = 0; j < 4; ++j) {  // along W (axis 1)
      Tap tap;
      const int64_t offsets[2] = {i - 1, j - 1};
      for (int64_t a = 0; a < 2; ++a) {
        const Value p = Add(base[a], ConstantLike(static_cast<double>(offsets[a]), base[a]));
        tap.position.push_back(ApplyPadding({p, ConstantLike(0, p)}, sizes[a], o).x);
      }
      tap.weight = Mul(weights[0][i], weights[1][j]);
      tap.weight_grad = {Neg(Mul(grads[0][i], weights[1][j])),
                         Neg(Mul(weights[0][i], grads[1][j]))};
      taps.push_back(std::move(tap));
    }
  }
  return taps;
}

// The sampling plan: per tap [N, K*P] flat positions (tap-major), in-range masks, weights and
// weight derivatives, and the per-axis chain-rule factors d(pixel coordinate)/d(grid value).
struct Plan {
  Value flat;                          // s64 [N, K*P], clamped into range
  Value weight;                        // [N, K, P], zero for taps outside the input
  std::vector<Value> weight_grad;      // per axis [N, K, P], zero outside
  std::vector<Value> coordinate_grad;  // per axis [N, P]
  int64_t taps = 0;
};

Value StackTaps(const std::vector<Value>& per_tap) {  // K x [N, P] -> [N, K, P]
  std::vector<Value> parts;
  for (const Value& v : per_tap) {
    parts.push_back(Reshape(v, {v.shape()[0], 1, v.shape()[1]}));
  }
  return Concatenate(parts, 1);
}

Plan MakePlan(const Value& grid, const Shape& sizes, const Options& o) {
  const int64_t n = grid.shape()[0], d = o.dims;
  const int64_t points = ir::NumElements(grid.shape()) / (n * d);
  const Value rows = Reshape(grid, {n, points, d});
  std::vector<Coordinate> coords;
  Plan plan;
  for (int64_t a = 0; a < d; ++a) {  // grid's last dim lists x (the innermost axis) first
    const Value g = Reshape(SliceAxis(rows, 2, d - 1 - a, d - a), {n, points});
    Coordinate c = Unnormalize(g, sizes[a], o);
    if (o.mode != kBicubic) c = ApplyPadding(c, sizes[a], o);
    plan.coordinate_grad.push_back(c.grad);
    coords.push_back(c);
  }
  const std::vector<Tap> taps = o.mode == kBilinear  ? LinearTaps(coords)
                                : o.mode == kNearest ? NearestTaps(coords)
                                                     : BicubicTaps(coords, sizes, o);
  plan.taps = static_cast<int64_t>(taps.size());
  std::vector<Value> flats, weights;
  std::vector<std::vector<Value>> grads(d);
  for (const Tap& tap : taps) {
    Value inside, flat;
    int64_t stride = 1;
    for (int64_t a = d - 1; a >= 0; --a) {
      const Value& p = tap.position[a];
      const double size = static_cast<double>(sizes[a]);
      // Float comparisons: NaN positions count as outside.
      const Value in = And(Compare(p, Scalar(-1, p), "GT"), Compare(p, Scalar(size, p), "LT"));
      inside = inside ? And(inside, in) : in;
      // Clamp before converting, so huge values stay defined.
      Value index = Convert(Min(Max(p, Scalar(0, p)), Scalar(size - 1, p)), DType::kS64);
      index = Mul(index, ir::IntegerConstant(stride, DType::kS64));
      flat = flat ? Add(flat, index) : index;
      stride *= sizes[a];
    }
    flats.push_back(flat);
    const Value keep = AsFloat(inside, tap.weight);
    weights.push_back(Mul(tap.weight, keep));
    for (int64_t a = 0; a < d; ++a) grads[a].push_back(Mul(tap.weight_grad[a], keep));
  }
  plan.flat = Reshape(StackTaps(flats), {n, plan.taps * points});
  plan.weight = StackTaps(weights);
  for (int64_t a = 0; a < d; ++a) plan.weight_grad.push_back(StackTaps(grads[a]));
  return plan;
}

// (batch, position) pairs [N, M, 2] addressing rows of a [N, positions, C] table.
Value RowPoints(const Value& flat) {
  const Shape shape{flat.shape()[0], flat.shape()[1], 1};
  const Value batch = Iota(TensorType{DType::kS64, shape}, 0);
  return Concatenate({batch, Reshape(flat, shape)}, 2);
}

// table [N, M, C] at flat [N, K*P] -> [N, K, P, C].
Value GatherTaps(const Value& table, const Plan& plan) {
  const int64_t n = table.shape()[0], c = table.shape()[2], m = plan.flat.shape()[1];
  const Value rows = ir::MakeOp(
      "stablehlo.gather", {table, RowPoints(plan.flat)}, TensorType{table.dtype(), {n, m, c}},
      "dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0, 1], "
      "start_index_map = [0, 1], index_vector_dim = 2>, slice_sizes = " +
          ir::I64Array({1, 1, c}));
  return Reshape(rows, {n, plan.taps, m / plan.taps, c});
}

// Sums updates [N, K, P, C] into a zero [N, positions, C] table at the taps' positions.
Value ScatterTaps(const Value& updates, const Plan& plan, int64_t positions) {
  const int64_t n = updates.shape()[0], c = updates.shape()[3], m = plan.flat.shape()[1];
  const TensorType scalar{updates.dtype(), {}};
  auto add = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{Add(a[0], a[1])};
  });
  return ir::MakeMultiOp("stablehlo.scatter",
                         {Constant(0, updates.dtype(), {n, positions, c}), RowPoints(plan.flat),
                          Reshape(updates, {n, m, c})},
                         {TensorType{updates.dtype(), {n, positions, c}}},
                         "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [2], "
                         "inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], "
                         "index_vector_dim = 2>",
                         {std::move(add)})[0];
}

// [N, C, spatial...] -> [N, positions, C] in the compute dtype.
Value Table(const Value& input, DType t) {
  const int64_t n = input.shape()[0], c = input.shape()[1];
  const int64_t positions = ir::NumElements(input.shape()) / std::max<int64_t>(n * c, 1);
  return Transpose(Reshape(Convert(input, t), {n, c, positions}), {0, 2, 1});
}

Shape Spatial(const Value& input) { return Shape(input.shape().begin() + 2, input.shape().end()); }

Options ReadOptions(const LoweringContext& ctx, size_t first, int64_t dims) {
  Options o;
  o.dims = dims;
  o.mode = static_cast<Interpolation>(ctx.int_arg(first));
  o.padding = static_cast<Padding>(ctx.int_arg(first + 1));
  o.align_corners = ctx.bool_arg(first + 2);
  if (o.mode < kBilinear || o.mode > kBicubic || (o.mode == kBicubic && dims != 2))
    throw UnsupportedError("grid_sampler interpolation mode " + std::to_string(o.mode));
  if (o.padding < kZeros || o.padding > kReflection)
    throw UnsupportedError("grid_sampler padding mode " + std::to_string(o.padding));
  return o;
}

// grid_sampler_{2,3}d(input, grid, interpolation_mode, padding_mode, align_corners).
// The CPU kernels' check (the meta functions lack it).
void CheckSameDType(const Value& input, const Value& grid) {
  if (grid.dtype() != input.dtype()) {
    throw std::invalid_argument(std::string("expected scalar type ") +
                                ScalarTypeName(input.dtype()) + " but found " +
                                ScalarTypeName(grid.dtype()));
  }
}

template <int64_t dims>
std::vector<Value> GridSamplerLowering(LoweringContext& ctx) {
  const Value input = ctx.tensor(0);
  CheckSameDType(input, ctx.tensor(1));
  const DType t = OpMathType(input.dtype());
  const Options o = ReadOptions(ctx, 2, dims);
  const Plan plan = MakePlan(Convert(ctx.tensor(1), t), Spatial(input), o);
  const Value values = GatherTaps(Table(input, t), plan);  // [N, K, P, C]
  const Value weight = BroadcastInDim(plan.weight, values.shape(), {0, 1, 2});
  const Value sampled = SumOver(Mul(values, weight), {1});  // [N, P, C]
  const TensorType& out = ctx.output();
  return {Convert(Reshape(Transpose(sampled, {0, 2, 1}), out.shape), out.dtype)};
}

// grid_sampler_{2,3}d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
// align_corners, output_mask) -> (grad_input, grad_grid).
template <int64_t dims>
std::vector<Value> GridSamplerBackwardLowering(LoweringContext& ctx) {
  const Value input = ctx.tensor(1), grid = ctx.tensor(2);
  const DType t = OpMathType(input.dtype());
  const Options o = ReadOptions(ctx, 3, dims);
  // output_mask may arrive as a bool list the context does not read: then compute both.
  std::vector<int64_t> mask{1, 1};
  if (ctx.has(6) && ctx.arg(6).kind == Argument::Kind::kIntList && ctx.int_list(6).size() == 2)
    mask = ctx.int_list(6);
  const Plan plan = MakePlan(Convert(grid, t), Spatial(input), o);
  const Value grad_out = Table(ctx.tensor(0), t);  // [N, P, C]
  const int64_t n = grad_out.shape()[0], p = grad_out.shape()[1], c = grad_out.shape()[2];
  const Shape tap_shape{n, plan.taps, p, c};
  const Value spread = BroadcastInDim(grad_out, tap_shape, {0, 2, 3});
  std::vector<Value> results{Constant(0, input.dtype()), Constant(0, grid.dtype())};
  if (mask.at(0)) {
    const Value weighted = Mul(spread, BroadcastInDim(plan.weight, tap_shape, {0, 1, 2}));
    const Value table = ScatterTaps(weighted, plan, ir::NumElements(Spatial(input)));
    const TensorType& out = ctx.output(0);
    results[0] = Convert(Reshape(Transpose(table, {0, 2, 1}), out.shape), out.dtype);
  }
  if (mask.at(1)) {
    // d(out)/d(coordinate) summed over channels and taps, then chained to the grid value.
    const Value product = SumOver(Mul(GatherTaps(Table(input, t), plan), spread), {3});
    std::vector<Value> columns(dims);
    for (int64_t a = 0; a < dims; ++a) {
      const Value g = SumOver(Mul(product, plan.weight_grad[a]), {1});  // [N, P]
      columns[dims - 1 - a] = Reshape(Mul(g, plan.coordinate_grad[a]), {n, p, 1});
    }
    const TensorType& out = ctx.output(1);
    results[1] = Convert(Reshape(Concatenate(columns, 2), out.shape), out.dtype);
  }
  return results;
}

LoweringRegistrar registrar({
    {"grid_sampler_2d", GridSamplerLowering<2>},
    {"grid_sampler_2d_backward", GridSamplerBackwardLowering<2>},
    {"grid_sampler_3d", GridSamplerLowering<3>},
    {"grid_sampler_3d_backward", GridSamplerBackwardLowering<3>},
});

}  // namespace
}  // namespace torch_tpu::ops
