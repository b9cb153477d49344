// Lowerings for 2-D pooling and interpolation, forward and backward: max_pool2d_with_indices,
// avg_pool2d, _adaptive_avg_pool2d, upsample_nearest2d and upsample_bilinear2d. Windows are
// stablehlo.reduce_window; backward passes scatter-add into the input or sum windows of the
// dilated gradient. Interpolation and adaptive windows are static, so their source indices and
// weights are computed here, with the CPU kernels' own arithmetic, and become constants.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// The accumulation dtype of the CPU's pooling kernels: float for reduced floating types, the
// type itself for f64 and integers.
DType Accumulation(DType dtype) {
  return dtype == DType::kF64 || ir::IsIntegral(dtype) ? dtype : DType::kF32;
}

// The CPU kernels (and these lowerings) have no bool forms; `floating_only` ops no integer ones.
void CheckDType(const Value& x, const char* op, bool floating_only) {
  if (x.dtype() == DType::kBool || (floating_only && !ir::IsFloating(x.dtype()))) {
    throw UnsupportedError(std::string(op) + " of a " +
                           (x.dtype() == DType::kBool ? "bool" : "integer") + " tensor");
  }
}

// A 2-element int[2] argument (PyTorch accepts a single value for both), or `fallback` if empty.
std::vector<int64_t> Pair(const LoweringContext& ctx, size_t i, std::vector<int64_t> fallback) {
  if (!ctx.has(i) || ctx.int_list(i).empty()) return fallback;
  const std::vector<int64_t>& v = ctx.int_list(i);
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

// The (kernel, stride, padding, dilation) of a 2-D pooling window over the last two dims.
struct PoolWindow {
  std::vector<int64_t> kernel, stride, padding, dilation{1, 1};
};

// stablehlo.reduce_window over the last two dims of each operand with `body` combining
// (accumulated..., element...) scalars; padding is filled with the init values. Output spatial
// sizes are `out` (the meta function's, which includes ceil_mode's extra window).
template <typename Body>
std::vector<Value> ReduceWindow(const std::vector<Value>& operands, const std::vector<Value>& inits,
                                const PoolWindow& w, const std::vector<int64_t>& out, Body&& body) {
  const int64_t rank = operands[0].rank();
  std::vector<int64_t> dims(rank, 1), strides(rank, 1), dilations(rank, 1);
  std::string padding;
  Shape shape = operands[0].shape();
  for (int64_t i = 0; i < rank; ++i) {
    int64_t low = 0, high = 0;
    if (i >= rank - 2) {
      const int64_t s = i - (rank - 2);
      dims[i] = w.kernel[s];
      strides[i] = w.stride[s];
      dilations[i] = w.dilation[s];
      low = w.padding[s];
      // Enough high padding for the last (ceil_mode) window; any padding short of it is ignored
      // by the window count.
      const int64_t reach = (out[s] - 1) * w.stride[s] + (w.kernel[s] - 1) * w.dilation[s] + 1;
      high = std::max<int64_t>(reach - shape[i] - low, 0);
      shape[i] = out[s];
    }
    padding += (i ? ", [" : "[") + std::to_string(low) + ", " + std::to_string(high) + "]";
  }
  std::vector<TensorType> scalars, results;
  for (const Value& v : operands) {
    scalars.push_back(TensorType{v.dtype(), {}});
    results.push_back(TensorType{v.dtype(), shape});
  }
  std::vector<TensorType> arguments = scalars;
  arguments.insert(arguments.end(), scalars.begin(), scalars.end());
  std::vector<Value> all = operands;
  all.insert(all.end(), inits.begin(), inits.end());
  return ir::MakeMultiOp(
      "stablehlo.reduce_window", all, results,
      "window_dimensions = " + ir::I64Array(dims) + ", window_strides = " + ir::I64Array(strides) +
          ", window_dilations = " + ir::I64Array(dilations) + ", padding = dense<[" + padding +
          "]> : tensor<" + std::to_string(rank) + "x2xi64>",
      {ir::MakeRegion(arguments, body)});
}

Value SumWindows(const Value& x, const PoolWindow& w, const std::vector<int64_t>& out) {
  TensorType scalar{x.dtype(), {}};
  return ReduceWindow(
      {x}, {ir::ScalarConstant(0, x.dtype())}, w, out, [&](const std::vector<Value>& a) {
        return std::vector<Value>{ir::MakeOp("stablehlo.add", {a[0], a[1]}, scalar)};
      })[0];
}

Shape SpatialShape(const Value& x) { return {x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]}; }

// ---- max_pool2d_with_indices ----

// (self, kernel_size, stride, padding, dilation, ceil_mode) -> (values, indices): each index is
// the flat position h * W + w of the maximum in its plane. Ties keep the first (smallest) index,
// as the CPU's scan does; NaN wins over numbers, and among NaNs the CPU's scan keeps the last.
std::vector<Value> MaxPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, "max_pool2d", false);
  PoolWindow w;
  w.kernel = Pair(ctx, 1, {});
  w.stride = Pair(ctx, 2, w.kernel);
  w.padding = Pair(ctx, 3, {0, 0});
  w.dilation = Pair(ctx, 4, {1, 1});
  const Shape& out_shape = ctx.output(0).shape;
  const std::vector<int64_t> out{out_shape[out_shape.size() - 2], out_shape.back()};
  const Shape plane = SpatialShape(x);
  const int64_t rank = x.rank();
  Value flat = Add(Mul(Iota(TensorType{DType::kS64, x.shape()}, rank - 2),
                       ir::IntegerConstant(plane[1], DType::kS64)),
                   Iota(TensorType{DType::kS64, x.shape()}, rank - 1));
  const DType dtype = x.dtype();
  const bool floating = ir::IsFloating(dtype);
  Value lowest = floating
                     ? ir::ScalarConstant(-std::numeric_limits<double>::infinity(), dtype)
                     : ir::IntegerConstant(ir::ByteSize(dtype) == 8
                                               ? std::numeric_limits<int64_t>::min()
                                               : -(int64_t{1} << (ir::ByteSize(dtype) * 8 - 1)),
                                           dtype);
  if (ir::IsUnsignedInteger(dtype)) lowest = ir::IntegerConstant(0, dtype);
  Value no_index = ir::IntegerConstant(std::numeric_limits<int64_t>::max(), DType::kS64);
  auto results =
      ReduceWindow({x, flat}, {lowest, no_index}, w, out, [&](const std::vector<Value>& a) {
        const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
        Value a_wins = Compare(av, bv, "GT");
        Value tie = Compare(av, bv, "EQ");
        Value a_first = Compare(ai, bi, "LT");
        a_wins = Binary("stablehlo.or", a_wins, Binary("stablehlo.and", tie, a_first));
        if (floating) {
          Value a_nan = Compare(av, av, "NE"), b_nan = Compare(bv, bv, "NE");
          Value both_nan = Binary("stablehlo.and", a_nan, b_nan);
          Value a_last = Compare(ai, bi, "GT");
          a_wins = Select(
              both_nan, a_last,
              Select(a_nan, a_nan, Binary("stablehlo.and", Unary("stablehlo.not", b_nan), a_wins)));
        }
        return std::vector<Value>{Select(a_wins, av, bv), Select(a_wins, ai, bi)};
      });
  return {results[0], results[1]};
}

// Scatter-adds `updates` (flattened) into a zero 1-D value of `size` elements at `indices`.
Value ScatterAdd1D(const Value& updates, const Value& indices, int64_t size) {
  const int64_t n = ir::NumElements(updates.shape());
  TensorType scalar{updates.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{ir::MakeOp("stablehlo.add", {a[0], a[1]}, scalar)};
  });
  return ir::MakeMultiOp(
      "stablehlo.scatter",
      {Constant(0, updates.dtype(), {size}), Reshape(indices, {n, 1}), Reshape(updates, {n})},
      {TensorType{updates.dtype(), {size}}},
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
      "[0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>",
      {std::move(body)})[0];
}

// (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices): each
// gradient goes to the position its window's maximum came from.
std::vector<Value> MaxPoolBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x = ctx.tensor(1), indices = ctx.tensor(7);
  const Shape plane = SpatialShape(x);
  const int64_t plane_size = plane[0] * plane[1];
  const int64_t planes = ir::NumElements(x.shape()) / plane_size;
  const Shape& g = grad.shape();
  const int64_t per_plane = g[g.size() - 2] * g.back();
  // Flat positions in the whole input: plane * H * W + index.
  Value plane_start = Mul(Iota(TensorType{DType::kS64, {planes, per_plane}}, 0),
                          ir::IntegerConstant(plane_size, DType::kS64));
  Value position = Add(plane_start, Reshape(Convert(indices, DType::kS64), {planes, per_plane}));
  Value sum =
      ScatterAdd1D(Convert(grad, Accumulation(grad.dtype())), position, planes * plane_size);
  return {Convert(Reshape(sum, x.shape()), ctx.output().dtype)};
}

// ---- avg_pool2d ----

struct AvgPoolArgs {
  PoolWindow window;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};

// (self|grad_output..., kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override) with the window arguments starting at `first`.
AvgPoolArgs ReadAvgPool(const LoweringContext& ctx, size_t first) {
  AvgPoolArgs a;
  a.window.kernel = Pair(ctx, first, {});
  a.window.stride = Pair(ctx, first + 1, a.window.kernel);
  a.window.padding = Pair(ctx, first + 2, {0, 0});
  a.count_include_pad = ctx.bool_arg(first + 4, true);
  a.divisor_override = ctx.int_arg(first + 5, 0);
  return a;
}

// Each window's divisor, [OH, OW] in `dtype`: the override, or the number of window positions
// inside the padded input (count_include_pad) or inside the input itself.
Value AvgDivisors(const AvgPoolArgs& a, const Shape& plane, const std::vector<int64_t>& out,
                  DType dtype) {
  if (a.divisor_override != 0) return Constant(static_cast<double>(a.divisor_override), dtype, {});
  const PoolWindow& w = a.window;
  if (!a.count_include_pad) return SumWindows(Constant(1, dtype, plane), w, out);
  // Ones over the padded input; the ceil_mode extension beyond it counts zero.
  Value ones = Constant(1, dtype, {plane[0] + 2 * w.padding[0], plane[1] + 2 * w.padding[1]});
  PoolWindow unpadded = w;
  unpadded.padding = {0, 0};
  return SumWindows(ones, unpadded, out);
}

std::vector<Value> AvgPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, "avg_pool2d", false);
  const AvgPoolArgs a = ReadAvgPool(ctx, 1);
  const Shape& out_shape = ctx.output().shape;
  const std::vector<int64_t> out{out_shape[out_shape.size() - 2], out_shape.back()};
  const DType accumulation = Accumulation(x.dtype());
  Value sum = SumWindows(Convert(x, accumulation), a.window, out);
  return {
      Convert(Div(sum, AvgDivisors(a, SpatialShape(x), out, accumulation)), ctx.output().dtype)};
}

// (grad_output, self, kernel_size, ...): every input position receives the sum, over the windows
// covering it, of their gradient / divisor: a window sum of the stride-dilated gradient.
std::vector<Value> AvgPoolBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x = ctx.tensor(1);
  const AvgPoolArgs a = ReadAvgPool(ctx, 2);
  const PoolWindow& w = a.window;
  const DType accumulation = Accumulation(grad.dtype());
  const int64_t rank = grad.rank();
  const std::vector<int64_t> out{grad.shape()[rank - 2], grad.shape()[rank - 1]};
  const Shape plane = SpatialShape(x);
  Value scaled = Div(Convert(grad, accumulation), AvgDivisors(a, plane, out, accumulation));
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  for (int s = 0; s < 2; ++s) {
    const int64_t i = rank - 2 + s;
    const int64_t dilated = (out[s] - 1) * w.stride[s] + 1;
    low[i] = w.kernel[s] - 1;
    high[i] = w.padding[s] + plane[s] - dilated;
    interior[i] = w.stride[s] - 1;
  }
  Value spread = Pad(scaled, ir::ScalarConstant(0, accumulation), low, high, interior);
  PoolWindow gather_window{w.kernel, {1, 1}, {0, 0}, {1, 1}};
  const std::vector<int64_t> padded{w.padding[0] + plane[0], w.padding[1] + plane[1]};
  Value summed = SumWindows(spread, gather_window, padded);
  std::vector<int64_t> start(rank, 0), limit = summed.shape(), strides(rank, 1);
  start[rank - 2] = w.padding[0];
  start[rank - 1] = w.padding[1];
  return {Convert(Slice(summed, start, limit, strides), ctx.output().dtype)};
}

// ---- Static per-axis maps: adaptive windows and interpolation ----

Value I64Constant(const std::vector<int64_t>& values, const Shape& shape) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  const TensorType type{DType::kS64, {static_cast<int64_t>(values.size())}};
  return Reshape(ir::MakeOp("stablehlo.constant", {}, type,
                            "value = dense<[" + text + "]> : " + type.ToMlir()),
                 shape);
}

Value F32Constant(const std::vector<float>& values) {
  std::string text;
  char buffer[32];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buffer, sizeof(buffer), "%.9e", static_cast<double>(values[i]));
    text += (i ? ", " : "") + std::string(buffer);
  }
  const TensorType type{DType::kF32, {static_cast<int64_t>(values.size())}};
  return ir::MakeOp("stablehlo.constant", {}, type,
                    "value = dense<[" + text + "]> : " + type.ToMlir());
}

// x with `axis` replaced by the dims of `index_shape`, taking positions `indices` along it.
Value TakeAlongAxis(const Value& x, int64_t axis, const std::vector<int64_t>& indices,
                    const Shape& index_shape) {
  const int64_t batch = static_cast<int64_t>(index_shape.size());
  Shape index_dims = index_shape;
  index_dims.push_back(1);
  Shape slice_sizes = x.shape(), shape;
  slice_sizes[axis] = 1;
  std::vector<int64_t> offset_dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i == axis) {
      shape.insert(shape.end(), index_shape.begin(), index_shape.end());
      continue;
    }
    offset_dims.push_back(static_cast<int64_t>(shape.size()));
    shape.push_back(x.shape()[i]);
  }
  return ir::MakeOp(
      "stablehlo.gather", {x, I64Constant(indices, index_dims)}, TensorType{x.dtype(), shape},
      "dimension_numbers = #stablehlo.gather<offset_dims = " + ir::I64List(offset_dims) +
          ", collapsed_slice_dims = [" + std::to_string(axis) + "], start_index_map = [" +
          std::to_string(axis) + "], index_vector_dim = " + std::to_string(batch) +
          ">, slice_sizes = " + ir::I64Array(slice_sizes));
}

// The transpose of TakeAlongAxis: adds each element of `updates` (x's shape with `axis` replaced
// by `index_shape`) into position `indices` of a zero axis of `size`.
Value AddAlongAxis(const Value& updates, int64_t axis, const std::vector<int64_t>& indices,
                   const Shape& index_shape, int64_t size) {
  const int64_t batch = static_cast<int64_t>(index_shape.size());
  Shape index_dims = index_shape;
  index_dims.push_back(1);
  Shape shape;
  std::vector<int64_t> window_dims;
  for (int64_t i = 0; i < updates.rank(); ++i) {
    if (i >= axis && i < axis + batch) {
      if (i == axis) shape.push_back(size);
      continue;
    }
    window_dims.push_back(i);
    shape.push_back(updates.shape()[i]);
  }
  TensorType scalar{updates.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{ir::MakeOp("stablehlo.add", {a[0], a[1]}, scalar)};
  });
  return ir::MakeMultiOp(
      "stablehlo.scatter",
      {Constant(0, updates.dtype(), shape), I64Constant(indices, index_dims), updates},
      {TensorType{updates.dtype(), shape}},
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " +
          ir::I64List(window_dims) + ", inserted_window_dims = [" + std::to_string(axis) +
          "], scatter_dims_to_operand_dims = [" + std::to_string(axis) +
          "], index_vector_dim = " + std::to_string(batch) + ">",
      {std::move(body)})[0];
}

// Multiplies x by `weights` (one per position of `axis`).
Value ScaleAlongAxis(const Value& x, int64_t axis, const std::vector<float>& weights) {
  return Mul(x, Convert(BroadcastInDim(F32Constant(weights), x.shape(), {axis}), x.dtype()));
}

// Adaptive pooling's windows along one axis: output o averages [floor(o * in / out),
// ceil((o + 1) * in / out)). Padded to the widest window by repeating its last index, with
// weight 1 / count inside the window and 0 in the padding.
struct AdaptiveAxis {
  int64_t width = 1;
  std::vector<int64_t> indices;  // [out, width]
  std::vector<float> weights;    // [out, width]
  AdaptiveAxis(int64_t in, int64_t out) {
    auto start = [&](int64_t o) { return (o * in) / out; };
    auto end = [&](int64_t o) { return ((o + 1) * in + out - 1) / out; };
    for (int64_t o = 0; o < out; ++o) width = std::max(width, end(o) - start(o));
    for (int64_t o = 0; o < out; ++o) {
      const int64_t count = end(o) - start(o);
      for (int64_t j = 0; j < width; ++j) {
        indices.push_back(start(o) + std::min(j, count - 1));
        weights.push_back(j < count ? 1.0f / static_cast<float>(count) : 0.0f);
      }
    }
  }
};

// Averages along `axis` of x (accumulation dtype), one adaptive window per output position.
// Padding entries are zeroed with a select (not a product) so that NaN and inf stay in their
// windows.
Value AdaptiveAverageAxis(const Value& x, int64_t axis, int64_t out) {
  const AdaptiveAxis map(x.shape()[axis], out);
  Value taken = TakeAlongAxis(x, axis, map.indices, {out, map.width});
  std::vector<int64_t> keep;
  for (float weight : map.weights) keep.push_back(weight != 0);
  Value inside =
      Compare(BroadcastInDim(I64Constant(keep, {out, map.width}), taken.shape(), {axis, axis + 1}),
              ir::IntegerConstant(1, DType::kS64), "EQ");
  taken = Select(inside, taken, ConstantLike(0, taken));
  Value sum = Reduce(taken, {axis + 1}, "stablehlo.add", ir::ScalarConstant(0, x.dtype()));
  std::vector<float> divisors;
  for (int64_t o = 0; o < out; ++o) divisors.push_back(map.weights[o * map.width]);
  return ScaleAlongAxis(sum, axis, divisors);
}

std::vector<Value> AdaptiveAvgPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, "adaptive_avg_pool2d", true);
  const Shape& out = ctx.output().shape;
  const int64_t rank = x.rank();
  Value y = Convert(x, Accumulation(x.dtype()));
  y = AdaptiveAverageAxis(y, rank - 2, out[rank - 2]);
  y = AdaptiveAverageAxis(y, rank - 1, out[rank - 1]);
  return {Convert(y, ctx.output().dtype)};
}

// Spreads the gradient of each output position over its window, weighted by 1 / count.
Value AdaptiveAverageAxisBackward(const Value& grad, int64_t axis, int64_t in) {
  const int64_t out = grad.shape()[axis];
  const AdaptiveAxis map(in, out);
  Shape spread_shape = grad.shape();
  spread_shape.insert(spread_shape.begin() + axis + 1, map.width);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < grad.rank(); ++i) dims.push_back(i <= axis ? i : i + 1);
  Value spread = BroadcastInDim(grad, spread_shape, dims);
  Value weights = Convert(Reshape(F32Constant(map.weights), {out, map.width}), grad.dtype());
  spread = Mul(spread, BroadcastInDim(weights, spread_shape, {axis, axis + 1}));
  return AddAlongAxis(spread, axis, map.indices, {out, map.width}, in);
}

// (grad_output, self)
std::vector<Value> AdaptiveAvgPoolBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x = ctx.tensor(1);
  const int64_t rank = x.rank();
  Value g = Convert(grad, Accumulation(grad.dtype()));
  g = AdaptiveAverageAxisBackward(g, rank - 1, x.shape()[rank - 1]);
  g = AdaptiveAverageAxisBackward(g, rank - 2, x.shape()[rank - 2]);
  return {Convert(g, ctx.output().dtype)};
}

// ---- upsample_nearest2d / upsample_bilinear2d ----

// PyTorch's compute_scales_value: 1 / scale when the caller gave one, else in / out.
float SourceScale(std::optional<double> scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                         : static_cast<float>(in) / static_cast<float>(out);
}

std::optional<double> OptionalDouble(const LoweringContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  return ctx.double_arg(i);
}

// nearest_idx: the source of each output position along one axis.
std::vector<int64_t> NearestSources(int64_t in, int64_t out, std::optional<double> scale) {
  std::vector<int64_t> sources;
  const float ratio = SourceScale(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) {
      sources.push_back(o);
    } else if (out == 2 * in) {
      sources.push_back(o >> 1);
    } else {
      const auto source = static_cast<int64_t>(std::floor(static_cast<float>(o) * ratio));
      sources.push_back(std::min(source, in - 1));
    }
  }
  return sources;
}

// Bilinear interpolation along one axis: output o = x[low] * (1 - lambda) + x[high] * lambda,
// with area_pixel_compute_source_index's float arithmetic.
struct LinearAxis {
  std::vector<int64_t> low, high;
  std::vector<float> low_weight, high_weight;
  LinearAxis(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
    float ratio;
    if (align_corners) {
      ratio = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    } else {
      ratio = SourceScale(scale, in, out);
    }
    for (int64_t o = 0; o < out; ++o) {
      float source = align_corners ? ratio * static_cast<float>(o)
                                   : std::max(ratio * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
      const int64_t index = std::min(static_cast<int64_t>(std::floor(source)), in - 1);
      const float lambda = std::min(std::max(source - static_cast<float>(index), 0.0f), 1.0f);
      low.push_back(index);
      high.push_back(index + (index < in - 1 ? 1 : 0));
      low_weight.push_back(1.0f - lambda);
      high_weight.push_back(lambda);
    }
  }
};

Value LinearAlongAxis(const Value& x, int64_t axis, const LinearAxis& map) {
  const Shape index_shape{static_cast<int64_t>(map.low.size())};
  return Add(ScaleAlongAxis(TakeAlongAxis(x, axis, map.low, index_shape), axis, map.low_weight),
             ScaleAlongAxis(TakeAlongAxis(x, axis, map.high, index_shape), axis, map.high_weight));
}

Value LinearAlongAxisBackward(const Value& grad, int64_t axis, const LinearAxis& map, int64_t in) {
  const Shape index_shape{static_cast<int64_t>(map.low.size())};
  return Add(
      AddAlongAxis(ScaleAlongAxis(grad, axis, map.low_weight), axis, map.low, index_shape, in),
      AddAlongAxis(ScaleAlongAxis(grad, axis, map.high_weight), axis, map.high, index_shape, in));
}

// The upsample ops' arguments: forward (self, output_size, [align_corners,] scales_h, scales_w),
// backward (grad_output, output_size, input_size, [align_corners,] scales_h, scales_w).
struct Upsample {
  bool bilinear, backward;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  bool align_corners = false;
  std::optional<double> scale_h, scale_w;
  Upsample(const LoweringContext& ctx, bool bilinear, bool backward)
      : bilinear(bilinear), backward(backward) {
    size_t next = backward ? 3 : 2;
    if (bilinear) align_corners = ctx.bool_arg(next++);
    scale_h = OptionalDouble(ctx, next);
    scale_w = OptionalDouble(ctx, next + 1);
    const Value t = ctx.tensor(0);
    const Shape& small = backward ? ctx.output().shape : t.shape();
    const Shape& large = backward ? t.shape() : ctx.output().shape;
    const size_t rank = small.size();
    in_h = small[rank - 2];
    in_w = small[rank - 1];
    out_h = large[rank - 2];
    out_w = large[rank - 1];
  }
};

template <bool bilinear>
std::vector<Value> UpsampleLowering(LoweringContext& ctx) {
  const Upsample u(ctx, bilinear, false);
  const Value x = ctx.tensor(0);
  CheckDType(x, bilinear ? "upsample_bilinear2d" : "upsample_nearest2d", bilinear);
  const int64_t rank = x.rank();
  if constexpr (bilinear) {
    Value y = Convert(x, Accumulation(x.dtype()));
    y = LinearAlongAxis(y, rank - 2, LinearAxis(u.in_h, u.out_h, u.align_corners, u.scale_h));
    y = LinearAlongAxis(y, rank - 1, LinearAxis(u.in_w, u.out_w, u.align_corners, u.scale_w));
    return {Convert(y, ctx.output().dtype)};
  } else {
    Value y = TakeAlongAxis(x, rank - 2, NearestSources(u.in_h, u.out_h, u.scale_h), {u.out_h});
    y = TakeAlongAxis(y, rank - 1, NearestSources(u.in_w, u.out_w, u.scale_w), {u.out_w});
    return {y};
  }
}

template <bool bilinear>
std::vector<Value> UpsampleBackwardLowering(LoweringContext& ctx) {
  const Upsample u(ctx, bilinear, true);
  const Value grad = ctx.tensor(0);
  const int64_t rank = grad.rank();
  Value g = Convert(grad, Accumulation(grad.dtype()));
  if constexpr (bilinear) {
    g = LinearAlongAxisBackward(g, rank - 1,
                                LinearAxis(u.in_w, u.out_w, u.align_corners, u.scale_w), u.in_w);
    g = LinearAlongAxisBackward(g, rank - 2,
                                LinearAxis(u.in_h, u.out_h, u.align_corners, u.scale_h), u.in_h);
  } else {
    g = AddAlongAxis(g, rank - 1, NearestSources(u.in_w, u.out_w, u.scale_w), {u.out_w}, u.in_w);
    g = AddAlongAxis(g, rank - 2, NearestSources(u.in_h, u.out_h, u.scale_h), {u.out_h}, u.in_h);
  }
  return {Convert(g, ctx.output().dtype)};
}

LoweringRegistrar registrar({
    {"max_pool2d_with_indices", MaxPoolLowering},
    {"max_pool2d_with_indices_backward", MaxPoolBackwardLowering},
    {"avg_pool2d", AvgPoolLowering},
    {"avg_pool2d_backward", AvgPoolBackwardLowering},
    {"_adaptive_avg_pool2d", AdaptiveAvgPoolLowering},
    {"_adaptive_avg_pool2d_backward", AdaptiveAvgPoolBackwardLowering},
    {"upsample_nearest2d", UpsampleLowering<false>},
    {"upsample_nearest2d_backward", UpsampleBackwardLowering<false>},
    {"upsample_bilinear2d", UpsampleLowering<true>},
    {"upsample_bilinear2d_backward", UpsampleBackwardLowering<true>},
});

}  // namespace
}  // namespace torch_tpu::ops
