// Lowerings for convolution, forward and backward, in every spatial rank (conv1d/2d/3d and their
// transposed forms), as PyTorch routes them to an out-of-tree backend: `_convolution` checks the
// arguments (the CPU's messages) and calls convolution_overrideable; autograd's
// convolution_backward calls convolution_backward_overrideable. Each is one or more
// stablehlo.convolution ops whose arithmetic follows the precision mode (ops/products.h).
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/products.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// The arguments shared by the forward and backward ops, one entry per spatial dimension.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// PyTorch passes a single value for every spatial dimension in some paths.
std::vector<int64_t> PerSpatialDim(const std::vector<int64_t>& values, size_t spatial) {
  if (values.size() == 1 && spatial > 1) return std::vector<int64_t>(spatial, values[0]);
  return values;
}

// Reads (stride, padding, dilation, transposed, output_padding, groups) starting at `first`.
ConvParams ReadParams(const LoweringContext& ctx, size_t first, size_t spatial) {
  ConvParams p;
  p.stride = PerSpatialDim(ctx.int_list(first), spatial);
  p.padding = PerSpatialDim(ctx.int_list(first + 1), spatial);
  p.dilation = PerSpatialDim(ctx.int_list(first + 2), spatial);
  p.transposed = ctx.bool_arg(first + 3);
  p.output_padding = PerSpatialDim(ctx.int_list(first + 4), spatial);
  p.groups = ctx.int_arg(first + 5);
  if (p.output_padding.empty()) p.output_padding.assign(spatial, 0);
  return p;
}

// "[b, f, 0, 1]" for leading labels ("b", "f") and `spatial` window dimensions.
std::string Layout(const char* first, const char* second, size_t spatial) {
  std::string text = std::string("[") + first + ", " + second;
  for (size_t i = 0; i < spatial; ++i) text += ", " + std::to_string(i);
  return text + "]";
}

// The window of one stablehlo.convolution, per spatial dimension.
struct Window {
  std::vector<int64_t> strides, low, high, lhs_dilation, rhs_dilation;
};

// Records stablehlo.convolution. Operands and result keep their two non-spatial dimensions first
// and their spatial dimensions after, in order; the layouts say which of the two leading
// dimensions is which. The result's leading sizes are leading0 and leading1.
struct ConvolutionOp {
  std::string lhs_layout, rhs_layout, result_layout;
  Window window;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t leading0 = 0, leading1 = 0;

  Value operator()(const Value& lhs, const Value& rhs, DType result, bool highest) const {
    Shape shape{leading0, leading1};
    std::string padding;
    for (size_t i = 0; i + 2 < static_cast<size_t>(lhs.rank()); ++i) {
      const int64_t input =
          (lhs.shape()[i + 2] - 1) * window.lhs_dilation[i] + 1 + window.low[i] + window.high[i];
      const int64_t kernel = (rhs.shape()[i + 2] - 1) * window.rhs_dilation[i] + 1;
      shape.push_back(input < kernel ? 0 : (input - kernel) / window.strides[i] + 1);
      padding += (i ? ", [" : "[") + std::to_string(window.low[i]) + ", " +
                 std::to_string(window.high[i]) + "]";
    }
    const size_t spatial = shape.size() - 2;
    std::string attributes =
        "window_strides = " + ir::I64Array(window.strides) + ", padding = dense<[" + padding +
        "]> : tensor<" + std::to_string(spatial) +
        "x2xi64>, lhs_dilation = " + ir::I64Array(window.lhs_dilation) +
        ", rhs_dilation = " + ir::I64Array(window.rhs_dilation) +
        ", dimension_numbers = #stablehlo.conv<" + lhs_layout + "x" + rhs_layout + "->" +
        result_layout + ">, feature_group_count = " + std::to_string(feature_groups) +
        " : i64, batch_group_count = " + std::to_string(batch_groups) + " : i64";
    if (highest) {
      attributes +=
          ", precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
    }
    return ir::MakeOp("stablehlo.convolution", {lhs, rhs}, TensorType{result, shape}, attributes);
  }
};

std::vector<int64_t> Ones(size_t n) { return std::vector<int64_t>(n, 1); }

// y = conv(x, w): x [N, C, ...], w [O, C / groups, k...] -> [N, O, ...], in the accumulation
// dtype.
Value ConvForward(const Value& x, const Value& w, const ConvParams& p) {
  const size_t spatial = x.rank() - 2;
  ConvolutionOp op;
  op.lhs_layout = op.result_layout = Layout("b", "f", spatial);
  op.rhs_layout = Layout("o", "i", spatial);
  op.window = {p.stride, p.padding, p.padding, Ones(spatial), p.dilation};
  op.feature_groups = p.groups;
  op.leading0 = x.shape()[0];
  op.leading1 = w.shape()[0];
  return PrecisionProduct(x, w, op);
}

// The transposed convolution: x [N, C, ...], w [C, O / groups, k...] -> [N, O, ...]. It is the
// gradient of ConvForward with respect to its input: a convolution of x dilated by the stride,
// with the spatially flipped kernel whose in/out features are swapped within each group.
Value ConvTransposed(const Value& x, const Value& w, const ConvParams& p) {
  const size_t spatial = x.rank() - 2;
  const int64_t in_features = w.shape()[0], out_per_group = w.shape()[1];
  std::vector<int64_t> spatial_dims;
  for (size_t i = 0; i < spatial; ++i) spatial_dims.push_back(static_cast<int64_t>(i) + 2);
  Value kernel =
      ir::MakeOp("stablehlo.reverse", {w}, w.type(), "dimensions = " + ir::I64Array(spatial_dims));
  ConvolutionOp op;
  op.lhs_layout = op.result_layout = Layout("b", "f", spatial);
  if (p.groups == 1) {
    op.rhs_layout = Layout("i", "o", spatial);
  } else {
    // [C, O/g, k] -> [g, C/g, O/g, k] -> [g, O/g, C/g, k] -> [O, C/g, k].
    Shape grouped{p.groups, in_features / p.groups, out_per_group};
    Shape swapped{p.groups * out_per_group, in_features / p.groups};
    std::vector<int64_t> permutation{0, 2, 1};
    for (size_t i = 0; i < spatial; ++i) {
      grouped.push_back(w.shape()[i + 2]);
      swapped.push_back(w.shape()[i + 2]);
      permutation.push_back(static_cast<int64_t>(i) + 3);
    }
    kernel = Reshape(Transpose(Reshape(kernel, grouped), permutation), swapped);
    op.rhs_layout = Layout("o", "i", spatial);
  }
  op.window.strides = Ones(spatial);
  op.window.lhs_dilation = p.stride;
  op.window.rhs_dilation = p.dilation;
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t reach = p.dilation[i] * (w.shape()[i + 2] - 1);
    op.window.low.push_back(reach - p.padding[i]);
    op.window.high.push_back(reach - p.padding[i] + p.output_padding[i]);
  }
  op.feature_groups = p.groups;
  op.leading0 = x.shape()[0];
  op.leading1 = p.groups * out_per_group;
  return PrecisionProduct(x, kernel, op);
}

// The weight gradient of ConvForward(x, w) given dy [N, O, ...]: w's shape [O, C / groups, k].
// Batch and features trade places: N is contracted, and each group of O pairs with its group of
// C (batch_group_count).
Value ConvWeightGradient(const Value& x, const Value& dy, const Shape& weight_shape,
                         const ConvParams& p) {
  const size_t spatial = x.rank() - 2;
  ConvolutionOp op;
  op.lhs_layout = op.result_layout = Layout("f", "b", spatial);
  op.rhs_layout = Layout("i", "o", spatial);
  op.window.strides = p.dilation;
  op.window.lhs_dilation = Ones(spatial);
  op.window.rhs_dilation = p.stride;
  op.window.low = p.padding;
  for (size_t i = 0; i < spatial; ++i) {
    // The high padding that makes the window count exactly the kernel size (negative when the
    // stride left trailing input unused).
    op.window.high.push_back((weight_shape[i + 2] - 1) * p.dilation[i] +
                             (dy.shape()[i + 2] - 1) * p.stride[i] + 1 - x.shape()[i + 2] -
                             p.padding[i]);
  }
  op.batch_groups = p.groups;
  op.leading0 = weight_shape[0];
  op.leading1 = weight_shape[1];
  return PrecisionProduct(x, dy, op);
}

void CheckNotBool(const Value& x) {
  if (x.dtype() == DType::kBool) throw UnsupportedError("convolution of a bool tensor");
}

// The CPU's backends check this after _convolution hands them the arguments; the overrideable
// path does not, so the lowering does (the CPU names the legacy tensor types instead).
void CheckSameType(const Value& input, const Value& parameter, const char* what) {
  if (input.dtype() != parameter.dtype()) {
    throw std::invalid_argument(std::string("Input type (") + ScalarTypeName(input.dtype()) +
                                ") and " + what + " type (" + ScalarTypeName(parameter.dtype()) +
                                ") should be the same");
  }
}

// convolution_overrideable(input, weight, bias?, stride, padding, dilation, transposed,
// output_padding, groups).
std::vector<Value> ConvolutionLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0), w = ctx.tensor(1);
  CheckSameType(x, w, "weight");
  if (ctx.is_tensor(2)) CheckSameType(x, ctx.tensor(2), "bias");
  CheckNotBool(x);
  const ConvParams p = ReadParams(ctx, 3, x.rank() - 2);
  Value y = p.transposed ? ConvTransposed(x, w, p) : ConvForward(x, w, p);
  if (ctx.is_tensor(2)) {
    const Value bias = Convert(ctx.tensor(2), y.dtype());
    y = Add(y, BroadcastInDim(bias, y.shape(), {1}));
  }
  return {Convert(y, ctx.output().dtype)};
}

// convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
// transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias).
// Gradients autograd does not need are not computed.
std::vector<Value> ConvolutionBackwardLowering(LoweringContext& ctx) {
  const Value dy = ctx.tensor(0), x = ctx.tensor(1), w = ctx.tensor(2);
  CheckNotBool(x);
  const ConvParams p = ReadParams(ctx, 3, x.rank() - 2);
  std::vector<bool> needed(3, true);
  if (ctx.has(9) && ctx.arg(9).kind == Argument::Kind::kIntList) {
    for (size_t r = 0; r < 3 && r < ctx.int_list(9).size(); ++r) needed[r] = ctx.int_list(9)[r];
  }
  // A gradient autograd does not need has an empty (or, left undefined, a 0-d) meta result: the
  // real ones have rank >= 1.
  for (size_t r = 0; r < 3; ++r) {
    needed[r] = needed[r] && ctx.output(r).rank() > 0 && ir::NumElements(ctx.output(r).shape) > 0;
  }
  std::vector<Value> results(3);

  if (needed[0]) {
    if (p.transposed) {
      // output_padding >= stride leaves whole extra windows in dy: drop what lies past the input.
      Value gradient = ConvForward(dy, w, p);
      std::vector<int64_t> limit = gradient.shape();
      for (size_t i = 2; i < limit.size(); ++i) limit[i] = x.shape()[i];
      results[0] = Slice(gradient, std::vector<int64_t>(limit.size(), 0), limit,
                         std::vector<int64_t>(limit.size(), 1));
    } else {
      ConvParams back = p;
      for (size_t i = 0; i < p.stride.size(); ++i) {
        // The input columns the forward window never reached come back as output padding.
        const int64_t reached = (dy.shape()[i + 2] - 1) * p.stride[i] - 2 * p.padding[i] +
                                p.dilation[i] * (w.shape()[i + 2] - 1) + 1;
        back.output_padding[i] = x.shape()[i + 2] - reached;
      }
      results[0] = ConvTransposed(dy, w, back);
    }
  }
  if (needed[1]) {
    results[1] = p.transposed ? ConvWeightGradient(dy, x, w.shape(), p)
                              : ConvWeightGradient(x, dy, w.shape(), p);
  }
  if (needed[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t i = 2; i < dy.rank(); ++i) dims.push_back(i);
    const DType accumulation =
        ir::IsFloating(dy.dtype()) && dy.dtype() != DType::kF64 ? DType::kF32 : dy.dtype();
    results[2] = Reduce(Convert(dy, accumulation), dims, "stablehlo.add",
                        ir::ScalarConstant(0, accumulation));
  }
  for (size_t r = 0; r < 3; ++r) {
    results[r] = results[r] ? Convert(results[r], ctx.output(r).dtype)
                            : Constant(0, ctx.output(r).dtype, ctx.output(r).shape);
  }
  return results;
}

LoweringRegistrar registrar({
    {"convolution_overrideable", ConvolutionLowering},
    {"convolution_backward_overrideable", ConvolutionBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
