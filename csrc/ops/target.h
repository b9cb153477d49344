// What the lowerings know of the compiler they lower for, set once when the device comes up.
// Only workarounds for a compiler's blind spots live here: the values a program computes never
// depend on it, only the form it is recorded in (which is part of its signature).
#pragma once

namespace torch_tpu::ops {

struct LoweringTarget {
  // XLA's CPU compiler keeps a bf16 x bf16 -> f32 dot on its fast bf16 kernels only when, early in
  // its pipeline, both operands look row-major in [batch, m, k] x [batch, k, n] form; otherwise it
  // widens the operands and runs the product in f32 at about half the speed (x @ w.T, most of
  // the backward's products, q @ k.T). See DotGeneral. (An unbatched dot whose own dims read the
  // rhs as [n, k], with no transpose op, does stay on the bf16 kernels; it measured no faster than
  // the transposed form, in a fused MLP step or a compiled LM step, so it is not emitted.)
  bool row_major_bf16_dots = false;
};

const LoweringTarget& CurrentLoweringTarget();
void SetLoweringTarget(const LoweringTarget& target);

}  // namespace torch_tpu::ops
