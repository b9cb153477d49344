// tpu::optimization_barrier: every operand passes through unchanged, but XLA may not move
// computation across the barrier (no fusion, reordering or rematerialization through it).
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// One overload per arity (tpu::optimization_barrier.n<k>, defined in torch_tpu/ops.py), so the
// boxed fallback sees fixed tensor results; every overload lowers to one barrier over all of them.
std::vector<Value> OptimizationBarrierLowering(LoweringContext& ctx) {
  std::vector<Value> operands;
  std::vector<TensorType> types;
  for (size_t i = 0; i < ctx.size(); ++i) {
    operands.push_back(ctx.tensor(i));
    types.push_back(operands.back().type());
  }
  if (operands.empty()) return {};
  return ir::MakeMultiOp("stablehlo.optimization_barrier", operands, types);
}

LoweringRegistrar registrar({
    {"tpu::optimization_barrier", OptimizationBarrierLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
