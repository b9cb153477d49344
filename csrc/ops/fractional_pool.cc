// Lowerings for fractional_max_pool{2,3}d and their backward passes. The windows come from
// random_samples, a runtime value, so their starts are computed in the program with the CPU
// kernel's own arithmetic (generate_intervals); every window element is gathered and each window
// reduced to the CPU's choice of maximum. The backward is adaptive max pooling's: a scatter-add
// of each gradient to the plane index its window's maximum came from.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// A binary floating-point format: its fraction bits and the exponent of its smallest normal.
struct FloatFormat {
  int mantissa_bits;
  int min_exponent;
};

FloatFormat FormatOf(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return {52, -1022};
    case DType::kF32:
      return {23, -126};
    case DType::kBF16:
      return {7, -126};
    case DType::kF16:
      return {10, -14};
    default:
      throw std::logic_error("fractional_max_pool: not a real floating type");
  }
}

// `value` rounded to the nearest number of `format`, ties to even (the current rounding mode).
double RoundOnHost(double value, FloatFormat format) {
  if (value == 0 || !std::isfinite(value)) return value;
  int exponent;
  std::frexp(value, &exponent);  // |value| in [2^(exponent - 1), 2^exponent)
  const int quantum = std::max(exponent - 1, format.min_exponent) - format.mantissa_bits;
  return std::ldexp(std::nearbyint(std::ldexp(value, -quantum)), quantum);
}

// 2^exponent (s64, within f64's normal range) as f64, built from its bits.
Value PowerOfTwo(const Value& exponent) {
  Value bits = Binary("stablehlo.shift_left", Add(exponent, ir::IntegerConstant(1023, DType::kS64)),
                      ir::IntegerConstant(52, DType::kS64));
  return ir::MakeOp("stablehlo.bitcast_convert", {bits}, TensorType{DType::kF64, exponent.shape()});
}

// RoundOnHost in the program, on f64 values: scaled by a power of two so the format's last
// place is 1, rounded to an integer and scaled back, all exact in f64. (A convert to the narrow
// type and back would be shorter, but XLA may drop such a pair as excess precision.)
Value RoundTo(const Value& x, FloatFormat format) {
  if (format.mantissa_bits >= 52) return x;
  const Value bits =
      ir::MakeOp("stablehlo.bitcast_convert", {x}, TensorType{DType::kS64, x.shape()});
  const Value biased_exponent =
      And(Binary("stablehlo.shift_right_logical", bits, ir::IntegerConstant(52, DType::kS64)),
          ir::IntegerConstant(0x7FF, DType::kS64));
  const Value exponent = Sub(biased_exponent, ir::IntegerConstant(1023, DType::kS64));
  const Value quantum = Sub(Max(exponent, ir::IntegerConstant(format.min_exponent, DType::kS64)),
                            ir::IntegerConstant(format.mantissa_bits, DType::kS64));
  const Value scaled = Mul(x, PowerOfTwo(Neg(quantum)));
  return Mul(Unary("stablehlo.round_nearest_even", scaled), PowerOfTwo(quantum));
}

// The first input position of every window along one spatial axis, for each plane ([P, out],
// s64), from the planes' samples ([P]): PyTorch's generate_intervals, start[i] = int((i + u) *
// alpha) - int(u * alpha) with alpha = (in - pool) / (out - 1), and the last window ending at the
// input's end. The CPU computes in the samples' type, whose c10::BFloat16 and Half arithmetic
// rounds every result, so each step here is exact in f64 and then rounded to that type.
Value IntervalStarts(const Value& samples, int64_t in, int64_t out, int64_t pool) {
  const int64_t planes = samples.shape()[0];
  const Value last = Constant(static_cast<double>(in - pool), DType::kS64, {planes, 1});
  if (out == 1) return last;
  const FloatFormat format = FormatOf(samples.dtype());
  const double alpha = RoundOnHost(RoundOnHost(static_cast<double>(in - pool), format) /
                                       RoundOnHost(static_cast<double>(out - 1), format),
                                   format);
  const Shape shape{planes, out - 1};
  const Value u = BroadcastInDim(Convert(samples, DType::kF64), shape, {0});
  const Value i = RoundTo(Iota(TensorType{DType::kF64, shape}, 1), format);
  auto scaled_to_int = [&](const Value& v) {
    return Convert(RoundTo(Mul(v, ir::ScalarConstant(alpha, DType::kF64)), format), DType::kS64);
  };
  const Value starts = Sub(scaled_to_int(RoundTo(Add(i, u), format)), scaled_to_int(u));
  return Concatenate({starts, last}, 1);
}

// x[indices] for a 1-D x and s64 indices of any shape, all in range.
Value TakeFlat(const Value& x, const Value& indices) {
  const int64_t n = ir::NumElements(indices.shape());
  const Value taken = ir::MakeOp(
      "stablehlo.gather", {x, Reshape(indices, {n, 1})}, TensorType{x.dtype(), {n}},
      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
      "index_vector_dim = 1>, slice_sizes = array<i64: 1>");
  return Reshape(taken, indices.shape());
}

// The column of random_samples that places the windows of each spatial axis: the CPU kernels
// read (W, H) in 2-D and (T, H, W) in 3-D.
constexpr int kSampleColumn[2][3] = {{1, 0, 0}, {0, 1, 2}};

// The CPU kernel's checks of random_samples ([N', C, dims]), which the meta function leaves to it.
void CheckSamples(const Value& x, const Value& samples, int dims) {
  auto fail = [](const std::string& message) { throw std::runtime_error(message); };
  if (samples.dtype() != x.dtype()) fail("Expect _random_samples to have the same dtype as input");
  if (samples.rank() != 3) {
    fail("Expect _random_samples to have 3 dimensions, got " + std::to_string(samples.rank()));
  }
  const bool batched = x.rank() == dims + 2;
  if (samples.shape()[0] < (batched ? x.shape()[0] : 1)) {
    fail("Expect _random_samples.size(0) no less then input batch size.");
  }
  if (samples.shape()[1] != x.shape()[batched ? 1 : 0]) {
    fail("Expect _random_samples.size(1) equals to input channel size.");
  }
  if (samples.shape()[2] != dims) {
    fail("Expect _random_samples.size(2) equals to " + std::to_string(dims) + "; got " +
         std::to_string(samples.shape()[2]) + ".");
  }
}

// (self, kernel_size, output_size, random_samples) -> (values, plane indices). Each window's
// element is the CPU scan's pick: the last NaN if there is one, else the first maximum in scan
// order (which is also plane-index order, so these are the largest and smallest plane index).
template <int dims>
std::vector<Value> FractionalMaxPoolLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  const Value all_samples = ctx.tensor(3);
  CheckSamples(x, all_samples, dims);
  if (!ir::IsFloating(x.dtype())) {
    throw UnsupportedError("\"fractional_max_pool" + std::to_string(dims) +
                           "d_out_frame\" not implemented for '" + ScalarTypeName(x.dtype()) + "'");
  }
  const Shape& out_shape = ctx.output(0).shape;
  if (ir::NumElements(out_shape) == 0) {
    return {Constant(0, x.dtype(), out_shape), Constant(0, DType::kS64, out_shape)};
  }
  const std::vector<int64_t>& kernel = ctx.int_list(1);
  const int64_t first = x.rank() - dims;
  const Shape plane(x.shape().begin() + first, x.shape().end());
  const Shape out(out_shape.begin() + first, out_shape.end());
  const int64_t plane_size = ir::NumElements(plane);
  const int64_t planes = ir::NumElements(x.shape()) / plane_size;

  // N' >= N rows of samples; an unbatched input uses the first.
  const Value samples =
      Reshape(SliceAxis(all_samples, 0, 0, planes / all_samples.shape()[1]), {planes, dims});

  // [P, out..., kernel...]: the plane index of every element of every window.
  Shape window_shape{planes};
  window_shape.insert(window_shape.end(), out.begin(), out.end());
  window_shape.insert(window_shape.end(), kernel.begin(), kernel.end());
  const TensorType window_positions{DType::kS64, window_shape};
  Value position = Constant(0, DType::kS64, window_shape);
  int64_t stride = plane_size;
  for (int s = 0; s < dims; ++s) {
    stride /= plane[s];
    const int column = kSampleColumn[dims - 2][s];
    const Value starts = IntervalStarts(
        Reshape(SliceAxis(samples, 1, column, column + 1), {planes}), plane[s], out[s], kernel[s]);
    const Value along =
        Add(BroadcastInDim(starts, window_shape, {0, 1 + s}), Iota(window_positions, 1 + dims + s));
    position = Add(position, Mul(along, ir::IntegerConstant(stride, DType::kS64)));
  }
  const Value flat = Reshape(x, {planes * plane_size});
  const Value plane_offset =
      Mul(Iota(window_positions, 0), ir::IntegerConstant(plane_size, DType::kS64));
  const Value values = TakeFlat(flat, Add(plane_offset, position));

  std::vector<int64_t> window_axes, kept_axes;
  for (int64_t axis = 0; axis <= dims; ++axis) kept_axes.push_back(axis);
  for (int64_t axis = 1 + dims; axis <= 2 * dims; ++axis) window_axes.push_back(axis);
  const Value nan = IsNan(values);
  const Value last_nan = Reduce(Select(nan, position, ConstantLike(-1, position)), window_axes,
                                "stablehlo.maximum", ir::IntegerConstant(-1, DType::kS64));
  const double lowest = -std::numeric_limits<double>::infinity();
  const Value numbers = Select(nan, ConstantLike(lowest, values), values);
  const Value largest =
      Reduce(numbers, window_axes, "stablehlo.maximum", ir::ScalarConstant(lowest, x.dtype()));
  const Value at_largest = Compare(numbers, BroadcastInDim(largest, window_shape, kept_axes), "EQ");
  const Value past_plane = ir::IntegerConstant(plane_size, DType::kS64);
  const Value first_largest =
      Reduce(Select(at_largest, position, ConstantLike(plane_size, position)), window_axes,
             "stablehlo.minimum", past_plane);
  const Value index =
      Select(Compare(last_nan, ir::IntegerConstant(0, DType::kS64), "GE"), last_nan, first_largest);

  // The values are read back at the chosen positions, so a NaN keeps its own bits.
  const TensorType output_positions{DType::kS64, index.shape()};
  const Value chosen = TakeFlat(
      flat,
      Add(Mul(Iota(output_positions, 0), ir::IntegerConstant(plane_size, DType::kS64)), index));
  return {Reshape(chosen, out_shape), Reshape(index, out_shape)};
}

// (grad_output, self, kernel_size, output_size, indices): adaptive max pooling's backward
// (grad_output, self, indices), called through the registry so the scatter lives in one place.
template <int dims>
std::vector<Value> FractionalMaxPoolBackwardLowering(LoweringContext& ctx) {
  LoweringContext call;
  call.name = "adaptive_max_pool" + std::to_string(dims) + "d_backward";
  call.args = {ctx.arg(0), ctx.arg(1), ctx.arg(4)};
  call.outputs = ctx.outputs;
  call.promoted = ctx.promoted;
  call.make_scalar_parameter = ctx.make_scalar_parameter;
  const Lowering lowering = FindLowering(call.name);
  if (lowering == nullptr) throw UnsupportedError(call.name + " has no lowering");
  return lowering(call);
}

LoweringRegistrar registrar({
    {"fractional_max_pool2d", FractionalMaxPoolLowering<2>},
    {"fractional_max_pool2d_backward", FractionalMaxPoolBackwardLowering<2>},
    {"fractional_max_pool3d", FractionalMaxPoolLowering<3>},
    {"fractional_max_pool3d_backward", FractionalMaxPoolBackwardLowering<3>},
});

}  // namespace
}  // namespace torch_tpu::ops
