// The fused recurrent cells PyTorch's RNN code calls on accelerators (nn.LSTM, nn.GRU and their
// cells): gate activations and state updates, and their backwards. The gate products (x W_ih^T,
// h W_hh^T) come in already computed; the workspace saves what the backward needs, laid out as
// on CUDA: LSTM [i, f, g, o] activated, GRU [r, z, input n gate, hidden n gate, hx].
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

Value OneMinus(const Value& x) { return Sub(ConstantLike(1, x), x); }

// The `count` equal chunks of a [B, count * H] value along dim 1.
std::vector<Value> Chunks(const Value& gates, int64_t count) {
  const int64_t width = gates.shape()[1] / count;
  std::vector<Value> chunks;
  for (int64_t c = 0; c < count; ++c)
    chunks.push_back(SliceAxis(gates, 1, c * width, (c + 1) * width));
  return chunks;
}

// Gate products plus the biases given (each [count * H], broadcast over the batch).
Value GatesWithBias(const LoweringContext& ctx, size_t gates, size_t bias, DType dtype) {
  Value value = Convert(ctx.tensor(gates), dtype);
  if (ctx.is_tensor(bias))
    value = Add(value, BroadcastInDim(Convert(ctx.tensor(bias), dtype), value.shape(), {1}));
  return value;
}

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?)
//   -> (hy, cy, workspace)
std::vector<Value> FusedLstmCellLowering(LoweringContext& ctx) {
  const DType type = OpMathType(ctx.tensor(0).dtype());
  Value gates = Add(GatesWithBias(ctx, 0, 3, type), GatesWithBias(ctx, 1, 4, type));
  std::vector<Value> g = Chunks(gates, 4);
  Value in = Sigmoid(g[0]), forget = Sigmoid(g[1]), cell = Tanh(g[2]), out = Sigmoid(g[3]);
  Value cy = Add(Mul(forget, Convert(ctx.tensor(2), type)), Mul(in, cell));
  Value hy = Mul(out, Tanh(cy));
  Value workspace = Concatenate({in, forget, cell, out}, 1);
  return {Convert(hy, ctx.output(0).dtype), Convert(cy, ctx.output(1).dtype),
          Convert(workspace, ctx.output(2).dtype)};
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
//   -> (grad_gates, grad_cx, grad_bias)
std::vector<Value> FusedLstmCellBackwardLowering(LoweringContext& ctx) {
  const DType type = OpMathType(ctx.tensor(4).dtype());
  std::vector<Value> w = Chunks(Convert(ctx.tensor(4), type), 4);
  const Value &in = w[0], &forget = w[1], &cell = w[2], &out = w[3];
  Value cx = Convert(ctx.tensor(2), type);
  Value tanh_cy = Tanh(Convert(ctx.tensor(3), type));
  Value zero = ConstantLike(0, cx);
  Value grad_hy = ctx.is_tensor(0) ? Convert(ctx.tensor(0), type) : BroadcastTo(zero, cx.shape());
  Value grad_cy = ctx.is_tensor(1) ? Convert(ctx.tensor(1), type) : BroadcastTo(zero, cx.shape());
  // The cell state's total gradient: through hy = o * tanh(cy), and from cy itself.
  Value grad_c = Add(Mul(Mul(grad_hy, out), OneMinus(Mul(tanh_cy, tanh_cy))), grad_cy);
  Value grad_in = Mul(Mul(grad_c, cell), Mul(in, OneMinus(in)));
  Value grad_forget = Mul(Mul(grad_c, cx), Mul(forget, OneMinus(forget)));
  Value grad_cell = Mul(Mul(grad_c, in), OneMinus(Mul(cell, cell)));
  Value grad_out = Mul(Mul(grad_hy, tanh_cy), Mul(out, OneMinus(out)));
  Value grad_gates = Concatenate({grad_in, grad_forget, grad_cell, grad_out}, 1);
  std::vector<Value> results = {Convert(grad_gates, ctx.output(0).dtype),
                                Convert(Mul(grad_c, forget), ctx.output(1).dtype)};
  results.push_back(ctx.bool_arg(5) ? Convert(SumOver(grad_gates, {0}), ctx.output(2).dtype)
                                    : Value{});
  return results;
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?)
//   -> (hy, workspace)
std::vector<Value> FusedGruCellLowering(LoweringContext& ctx) {
  const DType type = OpMathType(ctx.tensor(0).dtype());
  std::vector<Value> i = Chunks(GatesWithBias(ctx, 0, 3, type), 3);
  std::vector<Value> h = Chunks(GatesWithBias(ctx, 1, 4, type), 3);
  Value hx = Convert(ctx.tensor(2), type);
  Value reset = Sigmoid(Add(i[0], h[0]));
  Value update = Sigmoid(Add(i[1], h[1]));
  Value candidate = Tanh(Add(i[2], Mul(reset, h[2])));
  Value hy = Add(candidate, Mul(update, Sub(hx, candidate)));
  Value workspace = Concatenate({reset, update, i[2], h[2], hx}, 1);
  return {Convert(hy, ctx.output(0).dtype), Convert(workspace, ctx.output(1).dtype)};
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
//   -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)
std::vector<Value> FusedGruCellBackwardLowering(LoweringContext& ctx) {
  const DType type = OpMathType(ctx.tensor(1).dtype());
  std::vector<Value> w = Chunks(Convert(ctx.tensor(1), type), 5);
  const Value &reset = w[0], &update = w[1], &input_n = w[2], &hidden_n = w[3], &hx = w[4];
  Value grad_hy = Convert(ctx.tensor(0), type);
  Value candidate = Tanh(Add(input_n, Mul(reset, hidden_n)));
  Value grad_update = Mul(Mul(grad_hy, Sub(hx, candidate)), Mul(update, OneMinus(update)));
  Value grad_n = Mul(Mul(grad_hy, OneMinus(update)), OneMinus(Mul(candidate, candidate)));
  Value grad_reset = Mul(Mul(grad_n, hidden_n), Mul(reset, OneMinus(reset)));
  Value grad_input = Concatenate({grad_reset, grad_update, grad_n}, 1);
  Value grad_hidden = Concatenate({grad_reset, grad_update, Mul(grad_n, reset)}, 1);
  const bool has_bias = ctx.bool_arg(2);
  return {Convert(grad_input, ctx.output(0).dtype), Convert(grad_hidden, ctx.output(1).dtype),
          Convert(Mul(grad_hy, update), ctx.output(2).dtype),
          has_bias ? Convert(SumOver(grad_input, {0}), ctx.output(3).dtype) : Value{},
          has_bias ? Convert(SumOver(grad_hidden, {0}), ctx.output(4).dtype) : Value{}};
}

LoweringRegistrar registrar({
    {"_thnn_fused_lstm_cell", FusedLstmCellLowering},
    {"_thnn_fused_lstm_cell_backward_impl", FusedLstmCellBackwardLowering},
    {"_thnn_fused_gru_cell", FusedGruCellLowering},
    {"_thnn_fused_gru_cell_backward", FusedGruCellBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
