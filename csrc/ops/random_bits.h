// Random numbers from an op's generator key, for lowerings outside random.cc (dropout, the
// rejection samplers of random_samplers.cc). The key is the (seed, offset) pair aten/fallback.cc
// appends as the op's last two arguments.
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

// ---- drawing from an explicit generator state ----
// The state is stablehlo.rng_bit_generator's ThreeFry state, a u64[2] (key, counter). Every draw
// returns the state to draw from next, so a loop that carries it (a rejection sampler's
// stablehlo.while) gets fresh numbers each iteration.

// The state an op starts from: the key of its (seed, offset), counting from zero.
Value InitialRandomState(const LoweringContext& ctx);

struct RandomDraw {
  Value state;   // the next state
  Value values;  // the numbers drawn
};

// Random bits (ui32 or ui64) of `shape`.
RandomDraw DrawBits(const Value& state, const Shape& shape, DType bits_dtype);
// Uniform floats k * 2^-digits in [0, 1) of `compute` (f32 or f64), with all its digits (24, 53).
RandomDraw DrawUniform(const Value& state, const Shape& shape, DType compute);
// Standard normal floats of `compute` (f32 or f64).
RandomDraw DrawNormal(const Value& state, const Shape& shape, DType compute);

}  // namespace torch_tpu::ops
