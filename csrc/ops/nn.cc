// Lowerings for neural-network activations.
#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// relu keeps NaN (as CPU torch does): max(x, 0) would too, select on x > 0 would not.
std::vector<Value> ReluLowering(LoweringContext& ctx) {
  Value x = ctx.tensor(0);
  if (x.dtype() == DType::kBool) throw UnsupportedError("relu of a bool tensor");
  return {Max(x, ConstantLike(0, x))};
}

// threshold_backward(grad, self, threshold): grad where self > threshold, else 0.
std::vector<Value> ThresholdBackwardLowering(LoweringContext& ctx) {
  const DType t = ctx.output().dtype;
  Value grad = ctx.value(0, t);
  Value self = ctx.value(1, t);
  Value above = Compare(self, ctx.value(2, t), "GT");
  Value zeros = Constant(0, t, ctx.output().shape);
  return {
      Select(BroadcastTo(above, ctx.output().shape), BroadcastTo(grad, ctx.output().shape), zeros)};
}

LoweringRegistrar registrar({
    {"relu", ReluLowering},
    {"threshold_backward", ThresholdBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
