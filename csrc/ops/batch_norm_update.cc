// The batch-norm entry points of torch.export and functionalization: _batch_norm_with_update
// (training, running statistics updated in place; its _functional form is composite over it in
// PyTorch) and batch_norm_backward. Each re-arranges its arguments for the matching lowering of
// norm.cc (_native_batch_norm_legit, native_batch_norm_backward) and calls it through the
// registry, so the arithmetic lives in one place. `reserve` is cuDNN's scratch space: empty here,
// as on the CPU.
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

Argument BoolArgument(bool value) {
  Argument a;
  a.kind = Argument::Kind::kBool;
  a.scalar.kind = Scalar::Kind::kBool;
  a.scalar.i = value ? 1 : 0;
  return a;
}

// A context for `name` sharing ctx's scalar parameters, with the given arguments and outputs.
LoweringContext Forwarded(const LoweringContext& ctx, const char* name, std::vector<Argument> args,
                          std::vector<TensorType> outputs) {
  LoweringContext call;
  call.name = name;
  call.args = std::move(args);
  call.outputs = std::move(outputs);
  call.promoted = ctx.promoted;
  call.make_scalar_parameter = ctx.make_scalar_parameter;
  return call;
}

std::vector<Value> Call(LoweringContext& call) {
  Lowering lowering = FindLowering(call.name);
  if (lowering == nullptr) throw UnsupportedError(call.name + " has no lowering");
  return lowering(call);
}

// (input, weight?, bias?, running_mean, running_var, momentum, eps) -> the argument list of
// _native_batch_norm_legit: (input, weight?, bias?, running_mean, running_var, training, momentum,
// eps).
std::vector<Argument> TrainingArguments(const LoweringContext& ctx) {
  std::vector<Argument> args(ctx.args.begin(), ctx.args.begin() + 5);
  args.push_back(BoolArgument(true));
  args.push_back(ctx.arg(5));
  args.push_back(ctx.arg(6));
  return args;
}

Value EmptyReserve() { return Constant(0, DType::kU8, {0}); }

// _batch_norm_with_update -> (out, save_mean, save_invstd, reserve); running stats written.
std::vector<Value> BatchNormWithUpdateLowering(LoweringContext& ctx) {
  LoweringContext call = Forwarded(ctx, "_native_batch_norm_legit", TrainingArguments(ctx),
                                   {ctx.output(0), ctx.output(1), ctx.output(2)});
  std::vector<Value> results = Call(call);
  // running_mean and running_var keep their argument positions (3, 4).
  for (const auto& write : call.argument_writes) ctx.argument_writes.push_back(write);
  results.push_back(EmptyReserve());
  return results;
}

// batch_norm_backward(grad_out, input, weight, running_mean?, running_var?, save_mean?,
// save_invstd?, update, eps, output_mask, reserve): native_batch_norm_backward's arguments with
// `update` in the place of `train` (updating statistics means training), plus the reserve.
std::vector<Value> BatchNormBackwardLowering(LoweringContext& ctx) {
  std::vector<Argument> args(ctx.args.begin(), ctx.args.begin() + 10);
  LoweringContext call = Forwarded(ctx, "native_batch_norm_backward", std::move(args), ctx.outputs);
  return Call(call);
}

LoweringRegistrar registrar({
    {"_batch_norm_with_update", BatchNormWithUpdateLowering},
    {"batch_norm_backward", BatchNormBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
