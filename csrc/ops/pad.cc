// Lowerings for F.pad's reflect and replicate modes (reflection_pad{1,2,3}d,
// replication_pad{1,2,3}d) and their backward ops. The padding is separable: each padded axis is
// built from slices, reverses and concatenates, one axis at a time; the backward folds each pad
// region's gradient back onto the elements it copied. Constant and circular padding decompose into
// other ops before reaching us.
#include <algorithm>
#include <string>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

enum class PadMode { kReflect, kReplicate };

Value Reverse(const Value& x, int64_t axis) {
  if (x.shape()[axis] <= 1) return x;
  return ir::MakeOp("stablehlo.reverse", {x}, x.type(), "dimensions = " + ir::I64Array({axis}));
}

Value PadAxisWithZeros(const Value& x, int64_t axis, int64_t low, int64_t high) {
  if (low == 0 && high == 0) return x;
  std::vector<int64_t> lows(x.rank(), 0), highs(x.rank(), 0), interior(x.rank(), 0);
  lows[axis] = low;
  highs[axis] = high;
  return Pad(x, ir::ScalarConstant(0, x.dtype()), lows, highs, interior);
}

// The `count` elements added before (at_start) or after the input along `axis`.
Value Border(const Value& x, int64_t axis, int64_t count, bool at_start, PadMode mode) {
  const int64_t size = x.shape()[axis];
  if (mode == PadMode::kReplicate) {
    Value edge = at_start ? SliceAxis(x, axis, 0, 1) : SliceAxis(x, axis, size - 1, size);
    Shape shape = x.shape();
    shape[axis] = count;
    return BroadcastTo(edge, shape);
  }
  // Reflection mirrors around the edge element, which is not repeated.
  return Reverse(
      at_start ? SliceAxis(x, axis, 1, count + 1) : SliceAxis(x, axis, size - 1 - count, size - 1),
      axis);
}

// Pads `axis` by (low, high); a negative amount crops that side instead.
Value PadAxis(const Value& x, int64_t axis, int64_t low, int64_t high, PadMode mode) {
  std::vector<Value> parts;
  if (low > 0) parts.push_back(Border(x, axis, low, true, mode));
  parts.push_back(x);
  if (high > 0) parts.push_back(Border(x, axis, high, false, mode));
  Value padded = Concatenate(parts, axis);
  return SliceAxis(padded, axis, std::max<int64_t>(-low, 0),
                   padded.shape()[axis] - std::max<int64_t>(-high, 0));
}

// The gradient of PadAxis: `grad` is padded along `axis`, `size` the input's size there.
Value UnpadAxis(const Value& grad, int64_t axis, int64_t size, int64_t low, int64_t high,
                PadMode mode) {
  const int64_t grown_low = std::max<int64_t>(low, 0);
  const int64_t grown_high = std::max<int64_t>(high, 0);
  // Cropped elements received no gradient.
  Value full =
      PadAxisWithZeros(grad, axis, std::max<int64_t>(-low, 0), std::max<int64_t>(-high, 0));
  Value result = SliceAxis(full, axis, grown_low, grown_low + size);
  auto fold = [&](const Value& border, bool at_start) {
    const int64_t count = border.shape()[axis];
    if (mode == PadMode::kReplicate) {
      Value total =
          KeepDims(Reduce(border, {axis}, "stablehlo.add", ir::ScalarConstant(0, border.dtype())),
                   border.shape(), {axis});
      return at_start ? PadAxisWithZeros(total, axis, 0, size - 1)
                      : PadAxisWithZeros(total, axis, size - 1, 0);
    }
    Value mirrored = Reverse(border, axis);
    return at_start ? PadAxisWithZeros(mirrored, axis, 1, size - 1 - count)
                    : PadAxisWithZeros(mirrored, axis, size - 1 - count, 1);
  };
  if (grown_low > 0) result = Add(result, fold(SliceAxis(full, axis, 0, grown_low), true));
  if (grown_high > 0) {
    const int64_t end = full.shape()[axis];
    result = Add(result, fold(SliceAxis(full, axis, end - grown_high, end), false));
  }
  return result;
}

// padding = [last dim low, last dim high, next-to-last low, high, ...], as F.pad orders it.
int64_t PaddedAxis(const Value& x, size_t pair) {
  return x.rank() - 1 - static_cast<int64_t>(pair);
}

// {reflection,replication}_pad{1,2,3}d(self, padding)
template <PadMode kMode>
std::vector<Value> PadLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  const std::vector<int64_t>& padding = ctx.int_list(1);
  for (size_t pair = 0; pair < padding.size() / 2; ++pair) {
    x = PadAxis(x, PaddedAxis(x, pair), padding[2 * pair], padding[2 * pair + 1], kMode);
  }
  return {x};
}

// {reflection,replication}_pad{1,2,3}d_backward(grad_output, self, padding). Sums run in f32 for
// half-precision types (a corner element gathers up to 8 contributions in 3-D).
template <PadMode kMode>
std::vector<Value> PadBackwardLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const DType compute =
      ir::IsFloating(out.dtype) && ir::ByteSize(out.dtype) < 4 ? DType::kF32 : out.dtype;
  Value grad = Convert(ctx.tensor(0), compute);
  const Shape& input_shape = ctx.tensor(1).shape();
  const std::vector<int64_t>& padding = ctx.int_list(2);
  for (size_t pair = 0; pair < padding.size() / 2; ++pair) {
    const int64_t axis = PaddedAxis(grad, pair);
    grad =
        UnpadAxis(grad, axis, input_shape[axis], padding[2 * pair], padding[2 * pair + 1], kMode);
  }
  return {Convert(grad, out.dtype)};
}

const LoweringRegistrar registrar{
    {"reflection_pad1d", PadLowering<PadMode::kReflect>},
    {"reflection_pad2d", PadLowering<PadMode::kReflect>},
    {"reflection_pad3d", PadLowering<PadMode::kReflect>},
    {"replication_pad1d", PadLowering<PadMode::kReplicate>},
    {"replication_pad2d", PadLowering<PadMode::kReplicate>},
    {"replication_pad3d", PadLowering<PadMode::kReplicate>},
    {"reflection_pad1d_backward", PadBackwardLowering<PadMode::kReflect>},
    {"reflection_pad2d_backward", PadBackwardLowering<PadMode::kReflect>},
    {"reflection_pad3d_backward", PadBackwardLowering<PadMode::kReflect>},
    {"replication_pad1d_backward", PadBackwardLowering<PadMode::kReplicate>},
    {"replication_pad2d_backward", PadBackwardLowering<PadMode::kReplicate>},
    {"replication_pad3d_backward", PadBackwardLowering<PadMode::kReplicate>},
};

}  // namespace
}  // namespace torch_tpu::ops
