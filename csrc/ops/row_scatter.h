// Scatters and gathers of whole rows along dim 0, with the combiners of the reductions PyTorch
// names by string (index_reduce, segment_reduce, nonzero_static): a shared core for ops that group
// rows.
#pragma once

#include <string>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {

// A reduction a scatter applies: `op` combines two elements (empty: the update replaces).
enum class RowReduce { kReplace, kSum, kProd, kMax, kMin };

// "sum"/"mean" -> kSum, "prod" -> kProd, "amax"/"max" -> kMax, "amin"/"min" -> kMin.
RowReduce RowReduceFor(const std::string& name);

// The value that leaves any element unchanged under `reduce` (lowest/highest for max/min).
Value RowReduceIdentity(RowReduce reduce, DType dtype);

// operand [n, ...] with rows[i] (s64 [k]) combined with updates[i] ([k, ...]); rows outside
// [0, n) are dropped (XLA scatter semantics). Max and min propagate NaN as the CPU does.
Value ScatterRows(const Value& operand, const Value& rows, const Value& updates, RowReduce reduce);

// The permutation moving `dim` to the front, and its inverse.
std::vector<int64_t> DimToFront(int64_t dim, int64_t rank);
std::vector<int64_t> FrontToDim(int64_t dim, int64_t rank);

// The rows rows[i] (s64 [k], in range) of operand [n, ...]: [k, ...].
Value GatherRows(const Value& operand, const Value& rows);

}  // namespace torch_tpu::ops
