// Lowerings for 2-D and 3-D pooling and 1-D to 3-D interpolation, forward and backward:
// max_pool{2,3}d_with_indices, max_unpool{2,3}d, avg_pool{2,3}d, _adaptive_avg_pool{2,3}d,
// adaptive_max_pool{2,3}d, upsample_nearest{1,2,3}d, _upsample_nearest_exact{1,2,3}d,
// upsample_linear1d, bilinear2d, trilinear3d and bicubic2d. (1-D pooling decomposes into the 2-D
// ops.) Every lowering is generic over the number of trailing spatial dims. Windows are
// stablehlo.reduce_window; backward passes scatter-add into the input or sum windows of the dilated
// gradient. Interpolation and adaptive windows are static, so their source indices and weights are
// computed here, with the CPU kernels' own arithmetic, and become constants.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// The accumulation dtype of the CPU's pooling kernels: float for reduced floating types, the
// type itself for f64 and integers.
DType Accumulation(DType dtype) {
  return dtype == DType::kF64 || ir::IsIntegral(dtype) ? dtype : DType::kF32;
}

// The CPU kernels (and these lowerings) have no bool forms; `floating_only` ops no integer ones.
// The message reads as the CPU's dispatch error.
void CheckDType(const Value& x, const std::string& op, bool floating_only) {
  if (x.dtype() == DType::kBool || (floating_only && !ir::IsFloating(x.dtype()))) {
    throw UnsupportedError("\"" + op + "\" not implemented for '" + ScalarTypeName(x.dtype()) +
                           "'");
  }
}

std::string OpName(const char* family, int dims) { return family + std::to_string(dims) + "d"; }

// An int[dims] argument (PyTorch accepts a single value for all dims), or `fallback` if empty.
std::vector<int64_t> SpatialList(const LoweringContext& ctx, size_t i, int dims,
                                 std::vector<int64_t> fallback) {
  if (!ctx.has(i) || ctx.int_list(i).empty()) return fallback;
  const std::vector<int64_t>& v = ctx.int_list(i);
  return v.size() == 1 ? std::vector<int64_t>(dims, v[0]) : v;
}

// The (kernel, stride, padding, dilation) of a pooling window over the trailing spatial dims.
struct PoolWindow {
  std::vector<int64_t> kernel, stride, padding, dilation;
};

// The trailing `dims` sizes of `shape`.
std::vector<int64_t> Trailing(const Shape& shape, int dims) {
  return std::vector<int64_t>(shape.end() - dims, shape.end());
}

// stablehlo.reduce_window over the trailing spatial dims of each operand with `body` combining
// (accumulated..., element...) scalars; padding is filled with the init values. Output spatial
// sizes are `out` (the meta function's, which includes ceil_mode's extra window).
template <typename Body>
std::vector<Value> ReduceWindow(const std::vector<Value>& operands, const std::vector<Value>& inits,
                                const PoolWindow& w, const std::vector<int64_t>& out, Body&& body) {
  const int64_t rank = operands[0].rank();
  const auto first = rank - static_cast<int64_t>(w.kernel.size());
  std::vector<int64_t> dims(rank, 1), strides(rank, 1), dilations(rank, 1);
  std::string padding;
  Shape shape = operands[0].shape();
  for (int64_t i = 0; i < rank; ++i) {
    int64_t low = 0, high = 0;
    if (i >= first) {
      const int64_t s = i - first;
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

// ---- max pooling: max_pool{2,3}d_with_indices, adaptive_max_pool{2,3}d ----

// The flat position of every element within its plane of the trailing `dims` dims (d * H * W +
// h * W + w): the CPU's max-pool index.
Value PlaneIndex(const Shape& shape, int dims) {
  const auto rank = static_cast<int64_t>(shape.size());
  Value flat = Constant(0, DType::kS64, shape);
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= rank - dims; --i) {
    flat = Add(flat, Mul(Iota(TensorType{DType::kS64, shape}, i),
                         ir::IntegerConstant(stride, DType::kS64)));
    stride *= shape[i];
  }
  return flat;
}

// The max-with-index reduction's (initial value, initial index) for `dtype`.
std::vector<Value> MaxInits(DType dtype) {
  Value lowest = ir::IsFloating(dtype)
                     ? ir::ScalarConstant(-std::numeric_limits<double>::infinity(), dtype)
                     : ir::IntegerConstant(ir::ByteSize(dtype) == 8
                                               ? std::numeric_limits<int64_t>::min()
                                               : -(int64_t{1} << (ir::ByteSize(dtype) * 8 - 1)),
                                           dtype);
  if (ir::IsUnsignedInteger(dtype)) lowest = ir::IntegerConstant(0, dtype);
  return {lowest, ir::IntegerConstant(std::numeric_limits<int64_t>::max(), DType::kS64)};
}

// Combines two (value, index) candidates as the CPU's scan would: ties keep the first (smallest)
// index; NaN wins over numbers, and among NaNs the scan keeps the last. The result does not
// depend on the order of combination, so XLA may reduce in any order.
std::vector<Value> MaxWithIndex(const std::vector<Value>& a) {
  const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
  Value a_wins = Compare(av, bv, "GT");
  Value tie = Compare(av, bv, "EQ");
  Value a_first = Compare(ai, bi, "LT");
  a_wins = Or(a_wins, And(tie, a_first));
  if (ir::IsFloating(av.dtype())) {
    Value a_nan = IsNan(av), b_nan = IsNan(bv);
    a_wins = Select(And(a_nan, b_nan), Compare(ai, bi, "GT"),
                    Select(a_nan, a_nan, And(Not(b_nan), a_wins)));
  }
  return {Select(a_wins, av, bv), Select(a_wins, ai, bi)};
}

// (self, kernel_size, stride, padding, dilation, ceil_mode) -> (values, plane indices).
template <int dims>
std::vector<Value> MaxPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, OpName("max_pool", dims), false);
  PoolWindow w;
  w.kernel = SpatialList(ctx, 1, dims, {});
  w.stride = SpatialList(ctx, 2, dims, w.kernel);
  w.padding = SpatialList(ctx, 3, dims, std::vector<int64_t>(dims, 0));
  w.dilation = SpatialList(ctx, 4, dims, std::vector<int64_t>(dims, 1));
  const std::vector<int64_t> out = Trailing(ctx.output(0).shape, dims);
  return ReduceWindow({x, PlaneIndex(x.shape(), dims)}, MaxInits(x.dtype()), w, out, MaxWithIndex);
}

// Each gradient goes to the position (plane index) its window's maximum came from.
Value MaxPoolBackward(const Value& grad, const Value& x, const Value& indices, int dims,
                      DType result) {
  const int64_t plane_size = ir::NumElements(Trailing(x.shape(), dims));
  const int64_t planes = ir::NumElements(x.shape()) / plane_size;
  const int64_t per_plane = ir::NumElements(Trailing(grad.shape(), dims));
  // Flat positions in the whole input: plane * plane_size + index.
  Value plane_start = Mul(Iota(TensorType{DType::kS64, {planes, per_plane}}, 0),
                          ir::IntegerConstant(plane_size, DType::kS64));
  Value position = Add(plane_start, Reshape(Convert(indices, DType::kS64), {planes, per_plane}));
  Value sum =
      ScatterAdd1D(Convert(grad, Accumulation(grad.dtype())), position, planes * plane_size);
  return Convert(Reshape(sum, x.shape()), result);
}

// (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
template <int dims>
std::vector<Value> MaxPoolBackwardLowering(LoweringContext& ctx) {
  return {MaxPoolBackward(ctx.tensor(0), ctx.tensor(1), ctx.tensor(7), dims, ctx.output().dtype)};
}

// (grad_output, self, indices)
template <int dims>
std::vector<Value> AdaptiveMaxPoolBackwardLowering(LoweringContext& ctx) {
  return {MaxPoolBackward(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2), dims, ctx.output().dtype)};
}

// ---- max_unpool{2,3}d: the inverse of max pooling's (values, plane indices) ----

// Writes every element of self to position indices[i] of its plane of the output (zeros
// elsewhere). Where several elements name one position the last in self's order wins, as in the
// CPU's sequential loop: the scatter carries each element's order and keeps the later one.
// Indices are data: the CPU raises "Found an invalid max index" for one outside the output
// plane, which a device-side check raises at the next synchronization (aten/device_checks.h); in
// the program such elements are written to a spare slot past the end and dropped (no scatter
// ever goes out of bounds, whose meaning is backend-defined).
Value MaxUnpool(const Value& x, const Value& indices, const Shape& out, int dims) {
  const int64_t plane_in = ir::NumElements(Trailing(x.shape(), dims));
  const int64_t plane_out = ir::NumElements(Trailing(out, dims));
  const int64_t planes = ir::NumElements(out) / std::max<int64_t>(plane_out, 1);
  const int64_t n = planes * plane_in;
  const int64_t spare = planes * plane_out;
  if (n == 0) return Constant(0, x.dtype(), out);
  const TensorType positions{DType::kS64, {planes, plane_in}};
  Value index = Reshape(Convert(indices, DType::kS64), positions.shape);
  Value inside = And(Compare(index, ir::IntegerConstant(0, DType::kS64), "GE"),
                     Compare(index, ir::IntegerConstant(plane_out, DType::kS64), "LT"));
  Value flat = Add(Mul(Iota(positions, 0), ir::IntegerConstant(plane_out, DType::kS64)), index);
  flat = Select(inside, flat, Constant(static_cast<double>(spare), DType::kS64, positions.shape));
  Value order = Iota(TensorType{DType::kS64, {n}}, 0);
  const std::vector<TensorType> scalars{{x.dtype(), {}}, {DType::kS64, {}}};
  std::vector<TensorType> arguments = scalars;
  arguments.insert(arguments.end(), scalars.begin(), scalars.end());
  // (current value, current order, update value, update order): the later element wins.
  auto later = ir::MakeRegion(arguments, [](const std::vector<Value>& a) {
    Value update_wins = Compare(a[3], a[1], "GT");
    return std::vector<Value>{Select(update_wins, a[2], a[0]), Select(update_wins, a[3], a[1])};
  });
  const std::vector<Value> written =
      ir::MakeMultiOp("stablehlo.scatter",
                      {Constant(0, x.dtype(), {spare + 1}), Constant(-1, DType::kS64, {spare + 1}),
                       Reshape(flat, {n, 1}), Reshape(x, {n}), order},
                      {TensorType{x.dtype(), {spare + 1}}, TensorType{DType::kS64, {spare + 1}}},
                      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
                      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>",
                      {std::move(later)});
  return Reshape(SliceAxis(written[0], 0, 0, spare), out);
}

// max_unpool2d(self, indices, output_size); max_unpool3d(..., stride, padding), whose stride
// and padding only enter the meta function's checks.
template <int dims>
std::vector<Value> MaxUnpoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, OpName("max_unpool", dims), true);
  return {MaxUnpool(x, ctx.tensor(1), ctx.output().shape, dims)};
}

// ---- avg_pool{2,3}d ----

struct AvgPoolArgs {
  PoolWindow window;
  bool count_include_pad = true;
  int64_t divisor_override = 0;
};

// (self|grad_output..., kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override) with the window arguments starting at `first`.
AvgPoolArgs ReadAvgPool(const LoweringContext& ctx, size_t first, int dims) {
  AvgPoolArgs a;
  a.window.kernel = SpatialList(ctx, first, dims, {});
  a.window.stride = SpatialList(ctx, first + 1, dims, a.window.kernel);
  a.window.padding = SpatialList(ctx, first + 2, dims, std::vector<int64_t>(dims, 0));
  a.window.dilation = std::vector<int64_t>(dims, 1);
  a.count_include_pad = ctx.bool_arg(first + 4, true);
  a.divisor_override = ctx.int_arg(first + 5, 0);
  return a;
}

// Each window's divisor, shaped `out` in `dtype`: the override, or the number of window
// positions inside the padded input (count_include_pad) or inside the input itself.
Value AvgDivisors(const AvgPoolArgs& a, const Shape& plane, const std::vector<int64_t>& out,
                  DType dtype) {
  if (a.divisor_override != 0) return Constant(static_cast<double>(a.divisor_override), dtype, {});
  const PoolWindow& w = a.window;
  if (!a.count_include_pad) return SumWindows(Constant(1, dtype, plane), w, out);
  // Ones over the padded input; the ceil_mode extension beyond it counts zero.
  Shape padded = plane;
  for (size_t s = 0; s < plane.size(); ++s) padded[s] += 2 * w.padding[s];
  PoolWindow unpadded = w;
  unpadded.padding.assign(plane.size(), 0);
  return SumWindows(Constant(1, dtype, padded), unpadded, out);
}

template <int dims>
std::vector<Value> AvgPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, OpName("avg_pool", dims), false);
  const AvgPoolArgs a = ReadAvgPool(ctx, 1, dims);
  const std::vector<int64_t> out = Trailing(ctx.output().shape, dims);
  const DType accumulation = Accumulation(x.dtype());
  Value sum = SumWindows(Convert(x, accumulation), a.window, out);
  Value divisors = AvgDivisors(a, Trailing(x.shape(), dims), out, accumulation);
  return {Convert(Div(sum, divisors), ctx.output().dtype)};
}

// (grad_output, self, kernel_size, ...): every input position receives the sum, over the windows
// covering it, of their gradient / divisor: a window sum of the stride-dilated gradient.
template <int dims>
std::vector<Value> AvgPoolBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x = ctx.tensor(1);
  const AvgPoolArgs a = ReadAvgPool(ctx, 2, dims);
  const PoolWindow& w = a.window;
  const DType accumulation = Accumulation(grad.dtype());
  const int64_t rank = grad.rank();
  const std::vector<int64_t> out = Trailing(grad.shape(), dims);
  const std::vector<int64_t> plane = Trailing(x.shape(), dims);
  Value scaled = Div(Convert(grad, accumulation), AvgDivisors(a, plane, out, accumulation));
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  std::vector<int64_t> padded(dims), start(rank, 0);
  for (int s = 0; s < dims; ++s) {
    const int64_t i = rank - dims + s;
    const int64_t dilated = (out[s] - 1) * w.stride[s] + 1;
    low[i] = w.kernel[s] - 1;
    high[i] = w.padding[s] + plane[s] - dilated;
    interior[i] = w.stride[s] - 1;
    padded[s] = w.padding[s] + plane[s];
    start[i] = w.padding[s];
  }
  Value spread = Pad(scaled, ir::ScalarConstant(0, accumulation), low, high, interior);
  const std::vector<int64_t> ones(dims, 1), zeros(dims, 0);
  Value summed = SumWindows(spread, PoolWindow{w.kernel, ones, zeros, ones}, padded);
  const std::vector<int64_t> strides(rank, 1);
  return {Convert(Slice(summed, start, summed.shape(), strides), ctx.output().dtype)};
}

// ---- Static per-axis maps: adaptive windows and interpolation ----

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

// (self, output_size)
template <int dims>
std::vector<Value> AdaptiveAvgPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, OpName("adaptive_avg_pool", dims), true);
  const Shape& out = ctx.output().shape;
  const int64_t rank = x.rank();
  Value y = Convert(x, Accumulation(x.dtype()));
  for (int64_t axis = rank - dims; axis < rank; ++axis) y = AdaptiveAverageAxis(y, axis, out[axis]);
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
template <int dims>
std::vector<Value> AdaptiveAvgPoolBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), x = ctx.tensor(1);
  const int64_t rank = x.rank();
  Value g = Convert(grad, Accumulation(grad.dtype()));
  for (int64_t axis = rank - 1; axis >= rank - dims; --axis) {
    g = AdaptiveAverageAxisBackward(g, axis, x.shape()[axis]);
  }
  return {Convert(g, ctx.output().dtype)};
}

// (self, output_size) -> (values, plane indices): the maximum of each adaptive window. Each
// spatial axis is gathered into [out, widest window] (the padding repeats a window's last
// element, which changes neither its maximum nor its index), then the window axes are reduced.
template <int dims>
std::vector<Value> AdaptiveMaxPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, OpName("adaptive_max_pool", dims), true);
  const Shape& out = ctx.output(0).shape;
  const int64_t rank = x.rank();
  Value values = x, indices = PlaneIndex(x.shape(), dims);
  std::vector<int64_t> window_axes;
  for (int s = 0; s < dims; ++s) {
    const int64_t axis = rank - dims + 2 * s;  // each earlier axis became (out, window)
    const int64_t out_size = out[rank - dims + s];
    const AdaptiveAxis map(values.shape()[axis], out_size);
    values = TakeAlongAxis(values, axis, map.indices, {out_size, map.width});
    indices = TakeAlongAxis(indices, axis, map.indices, {out_size, map.width});
    window_axes.push_back(axis + 1);
  }
  const std::vector<TensorType> scalars{{x.dtype(), {}}, {DType::kS64, {}}};
  std::vector<TensorType> arguments = scalars;
  arguments.insert(arguments.end(), scalars.begin(), scalars.end());
  std::vector<Value> operands{values, indices};
  for (const Value& init : MaxInits(x.dtype())) operands.push_back(init);
  return ir::MakeMultiOp(
      "stablehlo.reduce", operands, {TensorType{x.dtype(), out}, TensorType{DType::kS64, out}},
      "dimensions = " + ir::I64Array(window_axes), {ir::MakeRegion(arguments, MaxWithIndex)});
}

// ---- upsample_{nearest,linear,bicubic}: separable interpolation along each spatial axis ----

enum class Interpolation { kNearest, kNearestExact, kLinear, kCubic };

// PyTorch's compute_scales_value: 1 / scale when the caller gave one, else in / out.
float SourceScale(std::optional<double> scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                         : static_cast<float>(in) / static_cast<float>(out);
}

std::optional<double> OptionalDouble(const LoweringContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  return ctx.double_arg(i);
}

// Output o along one axis is the sum over taps t of x[index[t][o]] * weight[t][o]; nearest
// modes have one tap and no weights (a plain gather, exact for integers, NaN and inf).
struct AxisTaps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<float>> weight;
};

// nearest_idx / nearest_neighbor_exact_compute_source_index.
AxisTaps NearestTaps(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  std::vector<int64_t> sources;
  const float ratio = SourceScale(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    if (!exact && out == in) {
      sources.push_back(o);
    } else if (!exact && out == 2 * in) {
      sources.push_back(o >> 1);
    } else {
      // The CPU floors in float: floorf of the product, taken in double for the exact mode.
      const float position = exact ? static_cast<float>((static_cast<double>(o) + 0.5) * ratio)
                                   : static_cast<float>(o) * ratio;
      sources.push_back(std::min(static_cast<int64_t>(std::floor(position)), in - 1));
    }
  }
  return {{sources}, {}};
}

// area_pixel_compute_source_index with guard_index_and_lambda, in float as on the CPU: the
// source's integer part and fraction for each output position.
void SourcePositions(int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                     bool cubic, std::vector<int64_t>& index, std::vector<float>& lambda) {
  float ratio;
  if (align_corners) {
    ratio = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  } else {
    ratio = SourceScale(scale, in, out);
  }
  for (int64_t o = 0; o < out; ++o) {
    float source = ratio * static_cast<float>(o);
    if (!align_corners) {
      source = ratio * (static_cast<float>(o) + 0.5f) - 0.5f;
      // Linear clamps below at 0; cubic keeps the negative position for its outer taps.
      if (!cubic) source = std::max(source, 0.0f);
    }
    const int64_t i = std::min(static_cast<int64_t>(std::floor(source)), in - 1);
    index.push_back(i);
    lambda.push_back(std::min(std::max(source - static_cast<float>(i), 0.0f), 1.0f));
  }
}

// Linear: x[i] * (1 - lambda) + x[i + 1] * lambda, the upper tap clamped to the last element.
AxisTaps LinearTaps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  std::vector<int64_t> index;
  std::vector<float> lambda;
  SourcePositions(in, out, align_corners, scale, false, index, lambda);
  AxisTaps taps{{{}, {}}, {{}, {}}};
  for (int64_t o = 0; o < out; ++o) {
    taps.index[0].push_back(index[o]);
    taps.index[1].push_back(index[o] + (index[o] < in - 1 ? 1 : 0));
    taps.weight[0].push_back(1.0f - lambda[o]);
    taps.weight[1].push_back(lambda[o]);
  }
  return taps;
}

// Bicubic (Keys, A = -0.75): taps at i - 1 .. i + 2, each clamped into the input.
AxisTaps CubicTaps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  constexpr float A = -0.75f;
  auto near = [&](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  std::vector<int64_t> index;
  std::vector<float> lambda;
  SourcePositions(in, out, align_corners, scale, true, index, lambda);
  AxisTaps taps{std::vector<std::vector<int64_t>>(4), std::vector<std::vector<float>>(4)};
  for (int64_t o = 0; o < out; ++o) {
    const float t = lambda[o];
    const float weights[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    for (int j = 0; j < 4; ++j) {
      taps.index[j].push_back(std::clamp<int64_t>(index[o] - 1 + j, 0, in - 1));
      taps.weight[j].push_back(weights[j]);
    }
  }
  return taps;
}

AxisTaps MakeTaps(Interpolation mode, int64_t in, int64_t out, bool align_corners,
                  std::optional<double> scale) {
  switch (mode) {
    case Interpolation::kNearest:
      return NearestTaps(in, out, scale, false);
    case Interpolation::kNearestExact:
      return NearestTaps(in, out, scale, true);
    case Interpolation::kLinear:
      return LinearTaps(in, out, align_corners, scale);
    case Interpolation::kCubic:
      return CubicTaps(in, out, align_corners, scale);
  }
  throw UnsupportedError("interpolation mode");
}

Value InterpolateAxis(const Value& x, int64_t axis, const AxisTaps& taps) {
  std::optional<Value> sum;
  for (size_t t = 0; t < taps.index.size(); ++t) {
    const Shape index_shape{static_cast<int64_t>(taps.index[t].size())};
    Value term = TakeAlongAxis(x, axis, taps.index[t], index_shape);
    if (!taps.weight.empty()) term = ScaleAlongAxis(term, axis, taps.weight[t]);
    sum = sum ? Add(*sum, term) : term;
  }
  return *sum;
}

Value InterpolateAxisBackward(const Value& grad, int64_t axis, const AxisTaps& taps, int64_t in) {
  std::optional<Value> sum;
  for (size_t t = 0; t < taps.index.size(); ++t) {
    const Shape index_shape{static_cast<int64_t>(taps.index[t].size())};
    Value scaled = taps.weight.empty() ? grad : ScaleAlongAxis(grad, axis, taps.weight[t]);
    Value term = AddAlongAxis(scaled, axis, taps.index[t], index_shape, in);
    sum = sum ? Add(*sum, term) : term;
  }
  return *sum;
}

// The upsample ops' arguments: forward (self, output_size, [align_corners,] scales...),
// backward (grad_output, output_size, input_size, [align_corners,] scales...), one scale per
// spatial dim. The maps of every spatial axis, by the small (input) and large (output) sizes.
std::vector<AxisTaps> UpsampleTaps(const LoweringContext& ctx, Interpolation mode, int dims,
                                   bool backward) {
  size_t next = backward ? 3 : 2;
  const bool has_align_corners = mode == Interpolation::kLinear || mode == Interpolation::kCubic;
  const bool align_corners = has_align_corners && ctx.bool_arg(next);
  if (has_align_corners) ++next;
  const Shape& small = backward ? ctx.output().shape : ctx.tensor(0).shape();
  const Shape& large = backward ? ctx.tensor(0).shape() : ctx.output().shape;
  const size_t first = small.size() - dims;
  std::vector<AxisTaps> taps;
  for (int s = 0; s < dims; ++s) {
    taps.push_back(MakeTaps(mode, small[first + s], large[first + s], align_corners,
                            OptionalDouble(ctx, next + s)));
  }
  return taps;
}

const char* ModeName(Interpolation mode, int dims) {
  switch (mode) {
    case Interpolation::kNearest:
      return "upsample_nearest";
    case Interpolation::kNearestExact:
      return "_upsample_nearest_exact";
    case Interpolation::kLinear:
      return dims == 1 ? "upsample_linear" : dims == 2 ? "upsample_bilinear" : "upsample_trilinear";
    case Interpolation::kCubic:
      return "upsample_bicubic";
  }
  return "upsample";
}

bool IsNearest(Interpolation mode) {
  return mode == Interpolation::kNearest || mode == Interpolation::kNearestExact;
}

template <Interpolation mode, int dims>
std::vector<Value> UpsampleLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckDType(x, OpName(ModeName(mode, dims), dims), !IsNearest(mode));
  const std::vector<AxisTaps> taps = UpsampleTaps(ctx, mode, dims, false);
  const int64_t first = x.rank() - dims;
  // Nearest gathers in the input's own type; weighted modes accumulate as the CPU does.
  Value y = IsNearest(mode) ? x : Convert(x, Accumulation(x.dtype()));
  for (int s = 0; s < dims; ++s) y = InterpolateAxis(y, first + s, taps[s]);
  return {Convert(y, ctx.output().dtype)};
}

template <Interpolation mode, int dims>
std::vector<Value> UpsampleBackwardLowering(LoweringContext& ctx) {
  const std::vector<AxisTaps> taps = UpsampleTaps(ctx, mode, dims, true);
  const Value grad = ctx.tensor(0);
  const Shape& in = ctx.output().shape;
  const int64_t first = grad.rank() - dims;
  Value g = Convert(grad, Accumulation(grad.dtype()));
  for (int s = dims - 1; s >= 0; --s) {
    g = InterpolateAxisBackward(g, first + s, taps[s], in[first + s]);
  }
  return {Convert(g, ctx.output().dtype)};
}

constexpr Interpolation kNearest = Interpolation::kNearest;
constexpr Interpolation kNearestExact = Interpolation::kNearestExact;
constexpr Interpolation kLinear = Interpolation::kLinear;
constexpr Interpolation kCubic = Interpolation::kCubic;

LoweringRegistrar registrar({
    {"max_pool2d_with_indices", MaxPoolLowering<2>},
    {"max_pool2d_with_indices_backward", MaxPoolBackwardLowering<2>},
    {"max_pool3d_with_indices", MaxPoolLowering<3>},
    {"max_pool3d_with_indices_backward", MaxPoolBackwardLowering<3>},
    {"adaptive_max_pool2d", AdaptiveMaxPoolLowering<2>},
    {"adaptive_max_pool2d_backward", AdaptiveMaxPoolBackwardLowering<2>},
    {"adaptive_max_pool3d", AdaptiveMaxPoolLowering<3>},
    {"adaptive_max_pool3d_backward", AdaptiveMaxPoolBackwardLowering<3>},
    {"max_unpool2d", MaxUnpoolLowering<2>},
    {"max_unpool3d", MaxUnpoolLowering<3>},
    {"avg_pool2d", AvgPoolLowering<2>},
    {"avg_pool2d_backward", AvgPoolBackwardLowering<2>},
    {"avg_pool3d", AvgPoolLowering<3>},
    {"avg_pool3d_backward", AvgPoolBackwardLowering<3>},
    {"_adaptive_avg_pool2d", AdaptiveAvgPoolLowering<2>},
    {"_adaptive_avg_pool2d_backward", AdaptiveAvgPoolBackwardLowering<2>},
    {"_adaptive_avg_pool3d", AdaptiveAvgPoolLowering<3>},
    {"_adaptive_avg_pool3d_backward", AdaptiveAvgPoolBackwardLowering<3>},
    {"upsample_nearest1d", UpsampleLowering<kNearest, 1>},
    {"upsample_nearest1d_backward", UpsampleBackwardLowering<kNearest, 1>},
    {"upsample_nearest2d", UpsampleLowering<kNearest, 2>},
    {"upsample_nearest2d_backward", UpsampleBackwardLowering<kNearest, 2>},
    {"upsample_nearest3d", UpsampleLowering<kNearest, 3>},
    {"upsample_nearest3d_backward", UpsampleBackwardLowering<kNearest, 3>},
    {"_upsample_nearest_exact1d", UpsampleLowering<kNearestExact, 1>},
    {"_upsample_nearest_exact1d_backward", UpsampleBackwardLowering<kNearestExact, 1>},
    {"_upsample_nearest_exact2d", UpsampleLowering<kNearestExact, 2>},
    {"_upsample_nearest_exact2d_backward", UpsampleBackwardLowering<kNearestExact, 2>},
    {"_upsample_nearest_exact3d", UpsampleLowering<kNearestExact, 3>},
    {"_upsample_nearest_exact3d_backward", UpsampleBackwardLowering<kNearestExact, 3>},
    {"upsample_linear1d", UpsampleLowering<kLinear, 1>},
    {"upsample_linear1d_backward", UpsampleBackwardLowering<kLinear, 1>},
    {"upsample_bilinear2d", UpsampleLowering<kLinear, 2>},
    {"upsample_bilinear2d_backward", UpsampleBackwardLowering<kLinear, 2>},
    {"upsample_trilinear3d", UpsampleLowering<kLinear, 3>},
    {"upsample_trilinear3d_backward", UpsampleBackwardLowering<kLinear, 3>},
    {"upsample_bicubic2d", UpsampleLowering<kCubic, 2>},
    {"upsample_bicubic2d_backward", UpsampleBackwardLowering<kCubic, 2>},
});

}  // namespace
}  // namespace torch_tpu::ops
