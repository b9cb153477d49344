#include "ops/growing.h"

#include <optional>
#include <unordered_set>

#include "ops/builder.h"

namespace torch_tpu::ops {

namespace {

// The ops whose result at a position depends only on their arguments there (after broadcasting).
bool IsPointwise(const std::string& name) {
  static const std::unordered_set<std::string> names = {
      "eq",          "ne",          "lt",          "le",          "gt",          "ge",
      "logical_and", "logical_or",  "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
      "bitwise_xor", "bitwise_not", "add",         "sub",         "rsub",        "mul",
      "div",         "where",       "masked_fill", "neg",
  };
  return names.count(name) > 0;
}

bool AnyGrowing(const LoweringContext& ctx) {
  for (const Argument& a : ctx.args) {
    if (!a.growing.empty()) return true;
  }
  return false;
}

// Whether a reduction's dims (argument 1: none, a dtype, a list or one dim) include `dim`.
bool ReducesOver(const LoweringContext& ctx, int64_t dim, int64_t rank) {
  if (!ctx.has(1) || ctx.arg(1).kind == Argument::Kind::kDType) return true;
  if (ctx.arg(1).kind == Argument::Kind::kInt) return NormalizeDim(ctx.int_arg(1), rank) == dim;
  if (ctx.arg(1).kind != Argument::Kind::kIntList) return false;
  if (ctx.int_list(1).empty()) return true;
  for (int64_t d : ctx.int_list(1)) {
    if (NormalizeDim(d, rank) == dim) return true;
  }
  return false;
}

// The lowering run again on `padded` (a copy of the op's context with padded arguments), or
// nothing when it refuses them: the plain results stand.
std::optional<std::vector<Value>> LowerPadded(LoweringContext padded, Lowering lowering) {
  padded.growing_results.clear();
  padded.argument_writes.clear();
  try {
    return lowering(padded);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void AddPaddedPointwiseResults(LoweringContext& ctx, Lowering lowering) {
  if (!IsPointwise(ctx.name) || ctx.outputs.empty()) return;
  const int64_t rank = static_cast<int64_t>(ctx.outputs[0].shape.size());
  GrowingValue first;
  int64_t dim = -1;  // the grown dim, in the results
  for (size_t i = 0; i < ctx.size(); ++i) {
    const GrowingValue grown = ctx.growing(i);
    if (!ctx.is_tensor(i) || !grown) continue;
    const int64_t at = grown.dim + rank - grown.padded.rank();
    if (at < 0) return;
    if (!first) {
      first = grown;
      dim = at;
    } else if (at != dim || grown.length != first.length || grown.bucket() != first.bucket()) {
      return;
    }
  }
  if (!first) return;
  for (const TensorType& output : ctx.outputs) {
    if (static_cast<int64_t>(output.shape.size()) != rank || output.shape[dim] != first.length) {
      return;
    }
  }
  LoweringContext padded = ctx;
  for (size_t i = 0; i < padded.size(); ++i) {
    if (!padded.is_tensor(i) || padded.args[i].host_scalar) continue;
    Argument& a = padded.args[i];
    if (const GrowingValue grown = ctx.growing(i)) {
      a.tensor = grown.padded;
      continue;
    }
    const int64_t at = dim - (rank - a.tensor.rank());
    if (at >= 0 && a.tensor.shape()[at] != 1) return;  // a plain argument spans the grown dim
  }
  for (TensorType& output : padded.outputs) output.shape[dim] = first.bucket();
  const std::optional<std::vector<Value>> results = LowerPadded(padded, lowering);
  if (!results) return;
  ctx.growing_results.assign(results->size(), GrowingValue{});
  for (size_t r = 0; r < results->size(); ++r) {
    if ((*results)[r].shape() != padded.outputs[r].shape) continue;
    ctx.growing_results[r] = PaddedResult((*results)[r], dim, first.length_parameter, first.length);
  }
}

void SumOverPadding(LoweringContext& ctx, Lowering lowering, std::vector<Value>& results) {
  if ((ctx.name != "sum" && ctx.name != "any") || !ctx.is_tensor(0)) return;
  const GrowingValue grown = ctx.growing(0);
  if (!grown || !ReducesOver(ctx, grown.dim, grown.padded.rank())) return;
  LoweringContext padded = ctx;
  padded.args[0].tensor = grown.padded;
  std::optional<std::vector<Value>> on_padding = LowerPadded(std::move(padded), lowering);
  if (!on_padding || on_padding->size() != results.size()) return;
  for (size_t r = 0; r < results.size(); ++r) {
    if ((*on_padding)[r].type() != results[r].type()) return;
  }
  results = std::move(*on_padding);
}

}  // namespace

GrowingValue PaddedResult(const Value& padded, int64_t dim, const Value& length_parameter,
                          int64_t length) {
  const Value positions = Iota(TensorType{DType::kS64, padded.shape()}, dim);
  const Value inside = Compare(positions, BroadcastTo(length_parameter, padded.shape()), "LT");
  return {Select(inside, padded, ConstantLike(0, padded)), length_parameter, dim, length};
}

void LowerGrowing(LoweringContext& ctx, Lowering lowering, std::vector<Value>& results) {
  if (!AnyGrowing(ctx)) return;  // the common case, on every op
  SumOverPadding(ctx, lowering, results);
  AddPaddedPointwiseResults(ctx, lowering);
}

}  // namespace torch_tpu::ops
