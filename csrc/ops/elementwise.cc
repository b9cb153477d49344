#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {
std::vector<Value> AddLowering(LoweringContext& ctx) {
  DType t = ctx.promoted;
  Value a = ctx.value(0, t);
  Value b = ctx.value(1, t);
  if (ctx.has(2) && !ctx.scalar(2).IsOne()) b = Mul(b, ctx.ScalarParameter(ctx.scalar(2), t));
  return {Add(a, b)};
}
LoweringRegistrar registrar({{"add", AddLowering}});
}  // namespace
}  // namespace torch_tpu::ops
