// Scaled dot-product attention as one op each way: tpu::scaled_dot_product_attention (the forward
// behind PyTorch's overrideable fused-attention path, src/torch_tpu/_attention.py) and
// _scaled_dot_product_fused_attention_overrideable_backward. The forward keeps the row
// log-sum-exp, so the backward recomputes the probabilities without a second softmax.
//
// Shapes: query (*, L, E), key (*, S, E), value (*, S, Ev), the same leading dims (B, H or H), or
// for grouped-query attention key/value heads that divide the query's (RepeatHeads); the
// log-sum-exp is (B, H, L), B = 1 for 3-D inputs, as PyTorch's meta function has it; a bias (bool:
// keep where true; float: added) broadcasts to (*, L, S); is_causal keeps key j <= query i. Rows
// with every key masked give zeros, as PyTorch's math path does (_safe_softmax). Scores and
// softmax run in f32 for f16/bf16 inputs; the products follow the precision mode.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/builder.h"
#include "ops/products.h"

namespace torch_tpu::ops {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// lhs x rhs over the shared leading (batch) dims, contracting lhs_dim with rhs_dim.
Value BatchedProduct(const Value& lhs, const Value& rhs, int64_t lhs_dim, int64_t rhs_dim) {
  std::vector<int64_t> batch;
  for (int64_t d = 0; d < lhs.rank() - 2; ++d) batch.push_back(d);
  return PrecisionProduct(
      lhs, rhs, [&](const Value& l, const Value& r, DType result, bool highest) {
        return DotGeneral(l, r, batch, batch, {lhs_dim}, {rhs_dim}, result, highest);
      });
}

struct Attention {
  DType compute;      // f32, or f64 for f64 inputs
  double scale;       // applied to the scores
  int64_t rows_axis;  // L's axis in the scores (*, L, S)
};

Attention Setup(const Value& query, const LoweringContext& ctx, size_t scale_index) {
  const int64_t e = query.shape().back();
  const double scale =
      ctx.has(scale_index) ? ctx.double_arg(scale_index) : 1.0 / std::sqrt(static_cast<double>(e));
  return {OpMathType(query.dtype()), scale, query.rank() - 2};
}

// The masked, scaled scores (*, L, S) in the compute dtype.
Value Scores(const Attention& a, const Value& query, const Value& key, const Value& bias,
             bool is_causal) {
  const int64_t last = query.rank() - 1;
  Value scores = Convert(BatchedProduct(query, key, last, last), a.compute);
  scores = Mul(scores, ConstantLike(a.scale, scores));
  const Value minus_infinity = ConstantLike(-kInfinity, scores);
  if (bias) {
    if (bias.dtype() == DType::kBool) {
      scores = Select(BroadcastTo(bias, scores.shape()), scores, minus_infinity);
    } else {
      scores = Add(scores, BroadcastTo(Convert(bias, a.compute), scores.shape()));
    }
  }
  if (is_causal) {
    const TensorType index{DType::kS64, scores.shape()};
    Value keep = Compare(Iota(index, a.rows_axis + 1), Iota(index, a.rows_axis), "LE");
    scores = Select(keep, scores, minus_infinity);
  }
  return scores;
}

// Grouped-query attention: key/value (B, Hkv, S, E) with Hkv dividing the query's H heads, each
// key/value head serving H / Hkv consecutive query heads (repeat_interleave, as enable_gqa).
Value RepeatHeads(const Value& x, int64_t heads) {
  if (x.rank() != 4 || x.shape()[1] == heads) return x;
  const Shape& s = x.shape();
  const int64_t group = heads / s[1];
  const Value repeated = BroadcastInDim(x, {s[0], s[1], group, s[2], s[3]}, {0, 1, 3, 4});
  return Reshape(repeated, {s[0], heads, s[2], s[3]});
}

// The gradient of a repeated key/value, summed back over each head's group.
Value SumHeadGroups(const Value& grad, int64_t kv_heads) {
  if (grad.rank() != 4 || grad.shape()[1] == kv_heads) return grad;
  const Shape& s = grad.shape();
  const Value grouped = Reshape(grad, {s[0], kv_heads, s[1] / kv_heads, s[2], s[3]});
  return SumOver(grouped, {2});
}

// Subtracting a row's max keeps exp in range; a row with no key left has max -inf, and 0 is
// subtracted instead (its exps are all 0).
Value FiniteRowMax(const Value& scores) {
  const int64_t last = scores.rank() - 1;
  Value max = Reduce(scores, {last}, "stablehlo.maximum", Constant(-kInfinity, scores.dtype()));
  return Select(Compare(max, ConstantLike(-kInfinity, max), "EQ"), ConstantLike(0, max), max);
}

Value WithLastAxis(const Value& rows, const Shape& shape) {
  return BroadcastTo(KeepDims(rows, shape, {static_cast<int64_t>(shape.size()) - 1}), shape);
}

// tpu::scaled_dot_product_attention(query, key, value, attn_bias?, is_causal, scale?)
// -> (output (*, L, Ev), logsumexp (B, H, L) f32)
std::vector<Value> AttentionForwardLowering(LoweringContext& ctx) {
  const Value query = ctx.tensor(0);
  Value key = ctx.tensor(1), value = ctx.tensor(2);
  Value bias = ctx.is_tensor(3) ? ctx.tensor(3) : Value{};
  // Keys and values grown by appending (a KV cache, exec/bucketing.h) are read padded to their
  // bucket and the padding masked out: decoding compiles once per bucket, not per length.
  // A mask grown with them (a left-padded batch's, built from the grown key positions,
  // ops/growing.h) is read padded too.
  const GrowingValue grown_key = ctx.growing(1), grown_value = ctx.growing(2);
  const GrowingValue grown_bias = ctx.growing(3);
  const int64_t keys_axis = query.rank() - 2;
  const bool bias_grown_alike =
      !bias || (grown_bias && grown_bias.dim == bias.rank() - 1 &&
                grown_bias.length == grown_key.length && grown_bias.bucket() == grown_key.bucket());
  if (grown_key && grown_value && grown_key.dim == keys_axis && grown_value.dim == keys_axis &&
      grown_key.length == grown_value.length && grown_key.bucket() == grown_value.bucket() &&
      bias_grown_alike) {
    key = grown_key.padded;
    value = grown_value.padded;
    const int64_t bucket = grown_key.bucket();
    const Value keys = Compare(Iota(TensorType{DType::kS64, {bucket}}, 0),
                               BroadcastTo(grown_key.length_parameter, {bucket}), "LT");
    if (!bias) {
      bias = keys;
    } else {
      const Value padded = grown_bias.padded;
      const Value keep = BroadcastTo(keys, padded.shape());
      bias = padded.dtype() == DType::kBool
                 ? And(padded, keep)
                 : Select(keep, padded, ConstantLike(-kInfinity, padded));
    }
  }
  const int64_t heads = query.rank() == 4 ? query.shape()[1] : 0;
  key = RepeatHeads(key, heads);
  value = RepeatHeads(value, heads);
  const Attention a = Setup(query, ctx, 5);
  const Value scores = Scores(a, query, key, bias, ctx.bool_arg(4));
  const Value max = FiniteRowMax(scores);
  const Value exps = Exp(Sub(scores, WithLastAxis(max, scores.shape())));
  const Value sums = SumOver(exps, {scores.rank() - 1});
  const Value empty_row = WithLastAxis(Compare(sums, ConstantLike(0, sums), "EQ"), scores.shape());
  const Value probabilities =
      Select(empty_row, ConstantLike(0, exps), Div(exps, WithLastAxis(sums, scores.shape())));
  // As the math path: probabilities in the inputs' dtype, then the product with value.
  const Value output = BatchedProduct(Convert(probabilities, value.dtype()), value,
                                      scores.rank() - 1, value.rank() - 2);
  const Value logsumexp = Reshape(Add(Log(sums), max), ctx.output(1).shape);  // (B, H, L)
  return {Convert(output, ctx.output(0).dtype), Convert(logsumexp, ctx.output(1).dtype)};
}

// Sums `x` down to `shape` (a shape it broadcast from): over extra leading dims and size-1 dims.
Value SumToShape(const Value& x, const Shape& shape) {
  const int64_t extra = x.rank() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < extra || (shape[d - extra] == 1 && x.shape()[d] != 1)) dims.push_back(d);
  }
  return Reshape(SumOver(x, dims), shape);
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query, key, value,
// attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
// is_causal, philox_seed, philox_offset, scale) -> (grad_query, grad_key, grad_value, grad_bias)
std::vector<Value> AttentionBackwardLowering(LoweringContext& ctx) {
  const Value query = ctx.tensor(1);
  const int64_t heads = query.rank() == 4 ? query.shape()[1] : 0;
  const int64_t kv_heads = ctx.tensor(2).rank() == 4 ? ctx.tensor(2).shape()[1] : 0;
  const Value key = RepeatHeads(ctx.tensor(2), heads), value = RepeatHeads(ctx.tensor(3), heads);
  const Value bias = ctx.is_tensor(4) ? ctx.tensor(4) : Value{};
  if (ctx.double_arg(12) != 0) throw UnsupportedError("attention dropout");
  const Attention a = Setup(query, ctx, 16);
  const Value scores = Scores(a, query, key, bias, ctx.bool_arg(13));
  const int64_t rows = a.rows_axis, columns = a.rows_axis + 1;
  // exp(scores - logsumexp) is the softmax; a row with no key left (logsumexp -inf) is all 0.
  Shape rows_shape = scores.shape();
  rows_shape.pop_back();
  const Value logsumexp = Reshape(Convert(ctx.tensor(7), a.compute), rows_shape);
  const Value empty_row =
      WithLastAxis(Compare(logsumexp, ConstantLike(-kInfinity, logsumexp), "EQ"), scores.shape());
  const Value probabilities = Select(empty_row, ConstantLike(0, scores),
                                     Exp(Sub(scores, WithLastAxis(logsumexp, scores.shape()))));
  const Value grad_out = ctx.tensor(0);
  const Value grad_value =
      BatchedProduct(Convert(probabilities, grad_out.dtype()), grad_out, rows, grad_out.rank() - 2);
  const Value grad_probabilities =
      Convert(BatchedProduct(grad_out, value, grad_out.rank() - 1, value.rank() - 1), a.compute);
  // The softmax's backward: p * (dp - sum over keys of p * dp), where that sum equals
  // sum over Ev of grad_out * out.
  const Value row_dot = SumOver(
      Mul(Convert(grad_out, a.compute), Convert(ctx.tensor(6), a.compute)), {grad_out.rank() - 1});
  const Value grad_scores =
      Mul(probabilities, Sub(grad_probabilities, WithLastAxis(row_dot, scores.shape())));
  const Value scaled = Mul(grad_scores, ConstantLike(a.scale, grad_scores));
  const Value scaled_low = Convert(scaled, query.dtype());
  const Value grad_query = BatchedProduct(scaled_low, key, columns, key.rank() - 2);
  const Value grad_key = BatchedProduct(scaled_low, query, rows, query.rank() - 2);
  Value grad_bias = Constant(0, ctx.output(3).dtype, ctx.output(3).shape);
  if (bias && bias.dtype() != DType::kBool && ir::NumElements(ctx.output(3).shape) > 0) {
    grad_bias = Convert(SumToShape(grad_scores, bias.shape()), ctx.output(3).dtype);
  }
  return {Convert(grad_query, ctx.output(0).dtype),
          Convert(SumHeadGroups(grad_key, kv_heads), ctx.output(1).dtype),
          Convert(SumHeadGroups(grad_value, kv_heads), ctx.output(2).dtype), grad_bias};
}

LoweringRegistrar registrar({
    {"tpu::scaled_dot_product_attention", AttentionForwardLowering},
    {"_scaled_dot_product_fused_attention_overrideable_backward", AttentionBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
