// Random numbers from an op's generator key, for lowerings outside random.cc (dropout).
// The key is the (seed, offset) pair aten/fallback.cc appends as the op's last two arguments.
#pragma once

#include <cstdint>

#include "ops/lowering.h"

namespace torch_tpu::ops {

// Uniform floats k * 2^-digits in [0, 1) of `compute` (f32 or f64), drawn with the key in the
// last two arguments of `ctx`.
Value UniformUnit(const LoweringContext& ctx, const Shape& shape, DType compute, int digits);

// The 64-bit key a random op's program takes for the generator's (seed, offset): the one runtime
// parameter that changes from draw to draw (a compiled graph's plan patches it on replay).
uint64_t RandomKey(uint64_t seed, uint64_t offset);

}  // namespace torch_tpu::ops
