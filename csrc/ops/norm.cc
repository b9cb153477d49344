// Lowerings for the normalization layers: batch norm, layer norm and group norm (forward and
// backward), and weight norm's fused ops (forward and backward). native_layer_norm and
// native_group_norm are CompositeExplicitAutograd in PyTorch, decomposing into native_batch_norm
// and elementwise ops; aten/layer_norm.cc and aten/fallback.cc route them here instead: one op to
// record, and the affine part rounded once, as on the CPU. Statistics are computed in f32 for
// f16/bf16 inputs, as the CPU does.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// Every dim of a rank-`rank` value except those in `kept`.
std::vector<int64_t> DimsExcept(int64_t rank, const std::vector<int64_t>& kept) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(kept.begin(), kept.end(), d) == kept.end()) dims.push_back(d);
  }
  return dims;
}

Value MeanOver(const Value& x, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[d];
  return Div(SumOver(x, dims), Constant(static_cast<double>(count), x.dtype()));
}

// The optional tensor argument `i` as `dtype`, or an empty Value when it is absent.
Value OptionalTensor(const LoweringContext& ctx, size_t i, DType dtype) {
  return ctx.is_tensor(i) ? Convert(ctx.tensor(i), dtype) : Value{};
}

// ---- batch norm: per-channel statistics over every dim but dim 1 ----

// Broadcasts a [C] value along dim 1 of `shape`.
Value PerChannel(const Value& channel_values, const Shape& shape) {
  return BroadcastInDim(channel_values, shape, {1});
}

// Where a batch-norm overload keeps its arguments: native_batch_norm, _native_batch_norm_legit
// and its _functional form take (input, weight?, bias?, running_mean?, running_var?, training,
// momentum, eps); the no_stats and no_training overloads drop some of them.
struct BatchNormArgs {
  int running_mean = 3;  // -1: none
  int running_var = 4;
  int training = 5;  // -1: evaluation
  int momentum = 6;
  int eps = 7;
};

struct BatchNormValues {
  Value out, mean, invstd;
  Value running_mean, running_var;  // updated, when training with running statistics
};

BatchNormValues BatchNorm(LoweringContext& ctx, const BatchNormArgs& at) {
  const bool training = at.training >= 0 && ctx.bool_arg(at.training);
  const bool has_running =
      at.running_mean >= 0 && ctx.is_tensor(at.running_mean) && ctx.is_tensor(at.running_var);
  const DType stat = OpMathType(ctx.tensor(0).dtype());
  Value x = Convert(ctx.tensor(0), stat);
  const Shape& shape = x.shape();
  if (!training && !has_running) {
    throw UnsupportedError("evaluation mode without running_mean and running_var");
  }
  BatchNormValues v;
  Value var;
  if (training) {
    const std::vector<int64_t> dims = DimsExcept(x.rank(), {1});
    v.mean = MeanOver(x, dims);
    Value centered = Sub(x, PerChannel(v.mean, shape));
    var = MeanOver(Mul(centered, centered), dims);  // biased, as normalization uses
  } else {
    v.mean = Convert(ctx.tensor(at.running_mean), stat);
    var = Convert(ctx.tensor(at.running_var), stat);
  }
  v.invstd = Rsqrt(Add(var, ctx.value(at.eps, stat)));
  v.out = Mul(Sub(x, PerChannel(v.mean, shape)), PerChannel(v.invstd, shape));
  if (Value weight = OptionalTensor(ctx, 1, stat)) v.out = Mul(v.out, PerChannel(weight, shape));
  if (Value bias = OptionalTensor(ctx, 2, stat)) v.out = Add(v.out, PerChannel(bias, shape));
  if (training && has_running) {
    // running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance.
    const int64_t count = ir::NumElements(shape) / shape[1];
    Value momentum = ctx.value(at.momentum, stat);
    Value keep = Sub(ConstantLike(1, momentum), momentum);
    auto update = [&](int i, const Value& batch) {
      Value running = ctx.tensor(i);
      return Convert(Add(Mul(keep, Convert(running, stat)), Mul(momentum, batch)), running.dtype());
    };
    const double correction = count > 1 ? static_cast<double>(count) / (count - 1) : 1.0;
    v.running_mean = update(at.running_mean, v.mean);
    v.running_var = update(at.running_var, Mul(var, Constant(correction, stat)));
  }
  return v;
}

// native_batch_norm and _native_batch_norm_legit -> (out, save_mean, save_invstd); training
// updates running_mean/running_var in place (written back as argument writes).
std::vector<Value> NativeBatchNormLowering(LoweringContext& ctx) {
  // _native_batch_norm_legit.no_stats: (input, weight?, bias?, training, momentum, eps)
  const BatchNormArgs at = ctx.size() == 6 ? BatchNormArgs{-1, -1, 3, 4, 5} : BatchNormArgs{};
  BatchNormValues v = BatchNorm(ctx, at);
  if (v.running_mean) {
    ctx.argument_writes.push_back({static_cast<size_t>(at.running_mean), v.running_mean});
    ctx.argument_writes.push_back({static_cast<size_t>(at.running_var), v.running_var});
  }
  return {Convert(v.out, ctx.output(0).dtype), Convert(v.mean, ctx.output(1).dtype),
          Convert(v.invstd, ctx.output(2).dtype)};
}

// _native_batch_norm_legit_functional (what aot_autograd's functionalization records): the
// updated running statistics are results, not writes.
std::vector<Value> NativeBatchNormFunctionalLowering(LoweringContext& ctx) {
  BatchNormValues v = BatchNorm(ctx, BatchNormArgs{});
  if (!v.running_mean) {  // evaluation: the running statistics come back unchanged
    v.running_mean = ctx.tensor(3);
    v.running_var = ctx.tensor(4);
  }
  return {Convert(v.out, ctx.output(0).dtype), Convert(v.mean, ctx.output(1).dtype),
          Convert(v.invstd, ctx.output(2).dtype), v.running_mean, v.running_var};
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var,
// momentum, eps)
std::vector<Value> NativeBatchNormNoTrainingLowering(LoweringContext& ctx) {
  BatchNormValues v = BatchNorm(ctx, BatchNormArgs{3, 4, -1, 5, 6});
  return {Convert(v.out, ctx.output(0).dtype), Convert(v.mean, ctx.output(1).dtype),
          Convert(v.invstd, ctx.output(2).dtype)};
}

// The input gradient of a normalization whose statistics were taken over `dims`:
// invstd * (g - mean(g) - xhat * mean(g * xhat)), where g = grad_out * weight.
Value NormalizedInputGrad(const Value& weighted_grad, const Value& normalized, const Value& invstd,
                          const std::vector<int64_t>& dims) {
  const Shape& shape = weighted_grad.shape();
  const std::vector<int64_t> kept = DimsExcept(weighted_grad.rank(), dims);
  auto spread = [&](const Value& reduced) { return BroadcastInDim(reduced, shape, kept); };
  Value grad_mean = spread(MeanOver(weighted_grad, dims));
  Value projection = spread(MeanOver(Mul(weighted_grad, normalized), dims));
  return Mul(invstd, Sub(Sub(weighted_grad, grad_mean), Mul(normalized, projection)));
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
//   save_invstd?, train, eps, output_mask) -> (grad_input, grad_weight, grad_bias).
std::vector<Value> NativeBatchNormBackwardLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(1).dtype());
  Value grad_out = Convert(ctx.tensor(0), stat);
  Value x = Convert(ctx.tensor(1), stat);
  const Shape& shape = x.shape();
  const bool training = ctx.bool_arg(7);
  const size_t mean_index = training ? 5 : 3;
  if (!ctx.is_tensor(mean_index) || !ctx.is_tensor(mean_index + 1)) {
    throw UnsupportedError(training ? "training without save_mean and save_invstd"
                                    : "evaluation mode without running_mean and running_var");
  }
  Value mean = Convert(ctx.tensor(mean_index), stat);
  Value invstd = training ? Convert(ctx.tensor(6), stat)
                          : Rsqrt(Add(Convert(ctx.tensor(4), stat), ctx.value(8, stat)));
  const std::vector<int64_t> dims = DimsExcept(x.rank(), {1});
  Value normalized = Mul(Sub(x, PerChannel(mean, shape)), PerChannel(invstd, shape));
  Value weight = OptionalTensor(ctx, 2, stat);
  Value weighted_grad = weight ? Mul(grad_out, PerChannel(weight, shape)) : grad_out;
  // In evaluation mode the statistics are constants, so the input gradient is a plain scaling.
  Value grad_input =
      training ? NormalizedInputGrad(weighted_grad, normalized, PerChannel(invstd, shape), dims)
               : Mul(weighted_grad, PerChannel(invstd, shape));
  Value grad_weight = SumOver(Mul(grad_out, normalized), dims);
  Value grad_bias = SumOver(grad_out, dims);
  return {Convert(grad_input, ctx.output(0).dtype), Convert(grad_weight, ctx.output(1).dtype),
          Convert(grad_bias, ctx.output(2).dtype)};
}

// ---- layer norm and group norm ----

// Splits the dims of a rank-`rank` value at `axis`: those before it (one statistic each) and the
// normalized ones from it on.
void SplitAt(int64_t rank, int64_t axis, std::vector<int64_t>& leading,
             std::vector<int64_t>& trailing) {
  for (int64_t d = 0; d < rank; ++d) (d < axis ? leading : trailing).push_back(d);
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd), mean and
// rstd with the input's leading dims and size-1 normalized dims (in f32 for f16/bf16 inputs, as
// CUDA and the meta function give them). An input of another dtype than weight's (bf16 activations
// with f32 parameters) gives out in the input's dtype, as the CPU does.
std::vector<Value> NativeLayerNormLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(0).dtype());
  const Value x = Convert(ctx.tensor(0), stat);
  const Shape& shape = x.shape();
  std::vector<int64_t> leading, trailing;
  SplitAt(x.rank(), x.rank() - static_cast<int64_t>(ctx.int_list(1).size()), leading, trailing);
  const Value mean = MeanOver(x, trailing);
  const Value centered = Sub(x, BroadcastInDim(mean, shape, leading));
  const Value var = MeanOver(Mul(centered, centered), trailing);  // biased, as the CPU's
  const Value rstd = Rsqrt(Add(var, ctx.value(4, stat)));
  Value out = Mul(centered, BroadcastInDim(rstd, shape, leading));
  if (Value weight = OptionalTensor(ctx, 2, stat)) {
    out = Mul(out, BroadcastInDim(weight, shape, trailing));
  }
  if (Value bias = OptionalTensor(ctx, 3, stat))
    out = Add(out, BroadcastInDim(bias, shape, trailing));
  return {Convert(out, ctx.output(0).dtype),
          Convert(Reshape(mean, ctx.output(1).shape), ctx.output(1).dtype),
          Convert(Reshape(rstd, ctx.output(2).shape), ctx.output(2).dtype)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
//   output_mask) -> (grad_input, grad_weight, grad_bias). mean and rstd have the input's leading
// dims and size-1 normalized dims; weight and bias have normalized_shape.
std::vector<Value> NativeLayerNormBackwardLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(1).dtype());
  Value grad_out = Convert(ctx.tensor(0), stat);
  Value x = Convert(ctx.tensor(1), stat);
  const Shape& shape = x.shape();
  const int64_t axis = x.rank() - static_cast<int64_t>(ctx.int_list(2).size());
  std::vector<int64_t> leading, trailing;
  SplitAt(x.rank(), axis, leading, trailing);
  auto per_row = [&](size_t i) {
    return BroadcastInDim(
        Reshape(Convert(ctx.tensor(i), stat), Shape(shape.begin(), shape.begin() + axis)), shape,
        leading);
  };
  Value invstd = per_row(4);
  Value normalized = Mul(Sub(x, per_row(3)), invstd);
  Value weight = OptionalTensor(ctx, 5, stat);
  Value weighted_grad = weight ? Mul(grad_out, BroadcastInDim(weight, shape, trailing)) : grad_out;
  Value grad_input = NormalizedInputGrad(weighted_grad, normalized, invstd, trailing);
  Value grad_weight = SumOver(Mul(grad_out, normalized), leading);
  Value grad_bias = SumOver(grad_out, leading);
  return {Convert(grad_input, ctx.output(0).dtype),
          Convert(Reshape(grad_weight, ctx.output(1).shape), ctx.output(1).dtype),
          Convert(Reshape(grad_bias, ctx.output(2).shape), ctx.output(2).dtype)};
}

// [N, group, C / group, HxW]: how group norm views its input, from the arguments N, C, HxW and
// group at `first` on.
Shape GroupedShape(const LoweringContext& ctx, size_t first) {
  const int64_t channels = ctx.int_arg(first + 1);
  const int64_t groups = ctx.int_arg(first + 3);
  return {ctx.int_arg(first), groups, channels / groups, ctx.int_arg(first + 2)};
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd): the input
// viewed as [N, group, C / group, HxW], statistics per sample and group (mean and rstd [N, group],
// in the input's dtype, as the CPU and the meta function give them), weight and bias per channel;
// out in the input's dtype, as on the CPU.
std::vector<Value> NativeGroupNormLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(0).dtype());
  const Shape grouped = GroupedShape(ctx, 3);
  const Value x = Reshape(Convert(ctx.tensor(0), stat), grouped);
  const Value mean = MeanOver(x, {2, 3});
  const Value centered = Sub(x, BroadcastInDim(mean, grouped, {0, 1}));
  const Value var = MeanOver(Mul(centered, centered), {2, 3});  // biased, as the CPU's
  const Value rstd = Rsqrt(Add(var, ctx.value(7, stat)));
  const Shape per_channel{grouped[0], grouped[1] * grouped[2], grouped[3]};
  Value out = Reshape(Mul(centered, BroadcastInDim(rstd, grouped, {0, 1})), per_channel);
  if (Value weight = OptionalTensor(ctx, 1, stat)) {
    out = Mul(out, BroadcastInDim(weight, per_channel, {1}));
  }
  if (Value bias = OptionalTensor(ctx, 2, stat))
    out = Add(out, BroadcastInDim(bias, per_channel, {1}));
  return {Convert(Reshape(out, ctx.output(0).shape), ctx.output(0).dtype),
          Convert(Reshape(mean, ctx.output(1).shape), ctx.output(1).dtype),
          Convert(Reshape(rstd, ctx.output(2).shape), ctx.output(2).dtype)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
//   -> (grad_input, grad_weight, grad_bias). mean and rstd are [N, group]; weight is [C].
// Works on the input viewed as [N, group, C / group, HxW].
std::vector<Value> NativeGroupNormBackwardLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(1).dtype());
  const Shape grouped = GroupedShape(ctx, 5);
  const int64_t groups = grouped[1], channels = grouped[1] * grouped[2];
  Value grad_out = Reshape(Convert(ctx.tensor(0), stat), grouped);
  Value x = Reshape(Convert(ctx.tensor(1), stat), grouped);
  auto per_group = [&](size_t i) {
    return BroadcastInDim(Convert(ctx.tensor(i), stat), grouped, {0, 1});
  };
  Value invstd = per_group(3);
  Value normalized = Mul(Sub(x, per_group(2)), invstd);
  Value weight = OptionalTensor(ctx, 4, stat);
  Value weighted_grad =
      weight ? Mul(grad_out,
                   BroadcastInDim(Reshape(weight, {groups, channels / groups}), grouped, {1, 2}))
             : grad_out;
  Value grad_input = NormalizedInputGrad(weighted_grad, normalized, invstd, {2, 3});
  const Shape per_channel{channels};
  Value grad_weight = Reshape(SumOver(Mul(grad_out, normalized), {0, 3}), per_channel);
  Value grad_bias = Reshape(SumOver(grad_out, {0, 3}), per_channel);
  return {Convert(Reshape(grad_input, ctx.output(0).shape), ctx.output(0).dtype),
          Convert(grad_weight, ctx.output(1).dtype), Convert(grad_bias, ctx.output(2).dtype)};
}

// ---- weight norm: w = g * v / ||v||, the norm over every dim of v but `dim` ----

// The fused kernels' dim: the first or the last, as the CPU's asserts.
int64_t WeightNormDim(const LoweringContext& ctx, size_t i, int64_t rank) {
  const int64_t dim = ctx.int_arg(i);
  if (dim != 0 && dim != rank - 1) {
    throw std::runtime_error("fused kernels can only be applied for first or last dim");
  }
  return dim;
}

// A per-slice value (g, the norms: v's size along `dim`, any shape of that many elements) as
// `stat`, broadcast over v's shape.
Value PerSlice(const Value& value, const Shape& shape, int64_t dim, DType stat) {
  return BroadcastInDim(Reshape(Convert(value, stat), {shape[dim]}), shape, {dim});
}

// _weight_norm_interface(v, g, dim) -> (w, norms). norms keep v's rank with size-1 dims and are
// f32 for f16/bf16 v, as the CPU's; w = v * (g / norms).
std::vector<Value> WeightNormLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(0).dtype());
  const Value v = Convert(ctx.tensor(0), stat);
  const int64_t dim = WeightNormDim(ctx, 2, v.rank());
  const Value norms = Sqrt(SumOver(Mul(v, v), DimsExcept(v.rank(), {dim})));
  const Value scale =
      Div(PerSlice(ctx.tensor(1), v.shape(), dim, stat), BroadcastInDim(norms, v.shape(), {dim}));
  return {Convert(Mul(v, scale), ctx.output(0).dtype),
          Convert(Reshape(norms, ctx.output(1).shape), ctx.output(1).dtype)};
}

// _weight_norm_interface_backward(grad_w, v, g, norms, dim) -> (grad_v, grad_g), with
// s = sum(grad_w * v) over each slice: grad_g = s / norm and
// grad_v = (g / norm) * (grad_w - v * s / norm^2).
std::vector<Value> WeightNormBackwardLowering(LoweringContext& ctx) {
  const DType stat = OpMathType(ctx.tensor(1).dtype());
  const Value grad_w = Convert(ctx.tensor(0), stat);
  const Value v = Convert(ctx.tensor(1), stat);
  const Shape& shape = v.shape();
  const int64_t dim = WeightNormDim(ctx, 4, v.rank());
  const Value norms = Reshape(Convert(ctx.tensor(3), stat), {shape[dim]});
  const Value dot = SumOver(Mul(grad_w, v), DimsExcept(v.rank(), {dim}));
  const Value grad_g = Div(dot, norms);
  const Value per_norm = Div(grad_g, norms);  // s / norm^2
  const Value grad_v =
      Mul(Div(PerSlice(ctx.tensor(2), shape, dim, stat), BroadcastInDim(norms, shape, {dim})),
          Sub(grad_w, Mul(v, BroadcastInDim(per_norm, shape, {dim}))));
  return {Convert(grad_v, ctx.output(0).dtype),
          Convert(Reshape(grad_g, ctx.output(1).shape), ctx.output(1).dtype)};
}

LoweringRegistrar registrar({
    {"_weight_norm_interface", WeightNormLowering},
    {"_weight_norm_interface_backward", WeightNormBackwardLowering},
    {"native_batch_norm", NativeBatchNormLowering},
    {"_native_batch_norm_legit", NativeBatchNormLowering},
    {"_native_batch_norm_legit_functional", NativeBatchNormFunctionalLowering},
    {"_native_batch_norm_legit_no_training", NativeBatchNormNoTrainingLowering},
    {"native_batch_norm_backward", NativeBatchNormBackwardLowering},
    {"native_layer_norm", NativeLayerNormLowering},
    {"native_group_norm", NativeGroupNormLowering},
    {"native_layer_norm_backward", NativeLayerNormBackwardLowering},
    {"native_group_norm_backward", NativeGroupNormBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
