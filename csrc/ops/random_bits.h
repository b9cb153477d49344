// Random numbers from an op's generator key, for lowerings outside random.cc (dropout).
// The key is the (seed, offset) pair aten/fallback.cc appends as the op's last two arguments.
#pragma once

#include "ops/lowering.h"

namespace torch_tpu::ops {

// Uniform floats k * 2^-digits in [0, 1) of `compute` (f32 or f64), drawn with the key in the
// last two arguments of `ctx`.
Value UniformUnit(const LoweringContext& ctx, const Shape& shape, DType compute, int digits);

}  // namespace torch_tpu::ops
