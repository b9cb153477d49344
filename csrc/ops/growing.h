// Growing layouts (exec/bucketing.h) through ops other than the appends that create them. A
// dimension that grows step by step reaches the ops that build masks from it (HF's attention mask
// while decoding a left-padded batch: a range of the key positions, compared, indexed, combined):
// these give their results in growing form too, computed on the padded values, so the whole chain
// compiles once per bucket. The padding of every growing value stays zeros.
#pragma once

#include "ops/lowering.h"

namespace torch_tpu::ops {

// A result in growing form: `padded`, computed over the whole bucket along `dim`, with its
// positions at and past the runtime length set to zero.
GrowingValue PaddedResult(const Value& padded, int64_t dim, const Value& length_parameter,
                          int64_t length);

// After an op's lowering gave `results`, for an op with growing tensor arguments:
// - a pointwise op is lowered again on their padded values, its results given in growing form
//   (ctx.growing_results), unless the arguments do not line up (grown dims that disagree after
//   broadcasting, a plain argument spanning the grown dim);
// - a sum (or any) over a grown dim reads the padded value directly (its padding is zeros):
//   `results` are replaced by ones that do not depend on the length.
void LowerGrowing(LoweringContext& ctx, Lowering lowering, std::vector<Value>& results);

}  // namespace torch_tpu::ops
