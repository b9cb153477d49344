// Growing layouts (exec/bucketing.h) through ops other than the appends that create them. A
// dimension that grows step by step reaches the ops that build masks from it (HF's attention mask
// while decoding a left-padded batch: a range of the key positions, compared, indexed, combined):
// these give their results in growing form too, computed on the padded values, so the whole chain
// compiles once per bucket. The padding of every growing value stays zeros.
#pragma once

#include "ops/lowering.h"

namespace torch_tpu::ops {

// `padded` with its positions at and past the runtime `length` along `dim` set to zero.
Value ZeroPastLength(const Value& padded, int64_t dim, const Value& length_parameter);

// A pointwise op with growing tensor arguments: lowers it again on their padded values and gives
// the results in growing form (ctx.growing_results). Nothing when the arguments do not line up:
// growing dims that disagree after broadcasting, or a plain argument spanning the grown dim.
void AddPaddedPointwiseResults(LoweringContext& ctx, Lowering lowering);

// A sum over a grown dim reads the padded value directly (its padding is zeros): `results` are
// replaced by ones that do not depend on the length.
void SumOverPadding(LoweringContext& ctx, Lowering lowering, std::vector<Value>& results);

}  // namespace torch_tpu::ops
