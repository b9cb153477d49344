// Lowerings for F.ctc_loss: _ctc_loss (-> neg_log_likelihood [B], log_alpha [B, T, 2*max_L+1])
// and _ctc_loss_backward (the gradient with respect to log_probs [T, B, C]).
//
// The alpha (forward) and beta (backward) recursions of Graves et al. run in log space over time
// in one stablehlo.while each, all batch elements and extended-label positions s at once, so the
// program does not grow with T. The lengths are host ints (the composite ctc_loss reads them), so
// per-batch offsets and masks are constants (the tensor-length overloads read them to the host in
// csrc/aten/ctc_loss_meta.cc, as the CPU does). The CPU leaves log_alpha unwritten (uninitialized)
// beyond each element's input length and 2*target_length+1 positions; here those entries are -inf.
// Arithmetic follows the CPU kernel: log-sum-exp against the largest term, -inf maxima taken as 0.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Value NegInfLike(const Value& like) { return ConstantLike(-kInf, like); }

// log(sum(exp(terms))) as the CPU computes it: against the largest term, a -inf maximum as 0.
Value LogSumExp(const std::vector<Value>& terms) {
  Value m = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) m = Max(m, terms[i]);
  m = Select(Compare(m, NegInfLike(m), "EQ"), ConstantLike(0, m), m);
  Value sum = Exp(Sub(terms[0], m));
  for (size_t i = 1; i < terms.size(); ++i) sum = Add(sum, Exp(Sub(terms[i], m)));
  return Add(Log(sum), m);
}

// x [B, S] shifted along s: x[s - shift], `fill` where that falls outside.
Value ShiftS(const Value& x, int64_t shift, const Value& fill) {
  const int64_t s = x.shape()[1];
  const int64_t k = std::min<int64_t>(std::abs(shift), s);
  if (shift > 0) return Pad(SliceAxis(x, 1, 0, s - k), fill, {0, k}, {0, 0}, {0, 0});
  return Pad(SliceAxis(x, 1, k, s), fill, {0, 0}, {0, k}, {0, 0});
}

Value ShiftS(const Value& x, int64_t shift) { return ShiftS(x, shift, Constant(-kInf, x.dtype())); }

Value DynamicRow(const Value& x, const Value& t) {  // x [T, ...] -> x[t] [...]
  std::vector<Value> operands{x, t};
  Shape sizes = x.shape();
  sizes[0] = 1;
  for (int64_t d = 1; d < x.rank(); ++d) operands.push_back(ConstantLike(0, t));
  const Value row = ir::MakeOp("stablehlo.dynamic_slice", operands, TensorType{x.dtype(), sizes},
                               "slice_sizes = " + ir::I64Array(sizes));
  return Reshape(row, Shape(sizes.begin() + 1, sizes.end()));
}

Value SetRow(const Value& x, const Value& row, const Value& t) {  // x[t] = row
  Shape sizes = row.shape();
  sizes.insert(sizes.begin(), 1);
  std::vector<Value> operands{x, Reshape(row, sizes), t};
  for (int64_t d = 1; d < x.rank(); ++d) operands.push_back(ConstantLike(0, t));
  return ir::MakeOp("stablehlo.dynamic_update_slice", operands, x.type());
}

// `for i in [0, count)` over `carried`; `body(i, values)` returns their new values. The body sees
// only its arguments (regions capture nothing), so loop-invariant inputs are carried too.
template <typename Body>
std::vector<Value> ForLoop(int64_t count, const std::vector<Value>& carried, Body&& body) {
  std::vector<Value> initial{ir::IntegerConstant(0, DType::kS64)};
  initial.insert(initial.end(), carried.begin(), carried.end());
  std::vector<TensorType> types;
  for (const Value& v : initial) types.push_back(v.type());
  auto condition = ir::MakeRegion(types, [&](const std::vector<Value>& a) {
    return std::vector<Value>{Compare(a[0], ir::IntegerConstant(count, DType::kS64), "LT")};
  });
  auto step = ir::MakeRegion(types, [&](const std::vector<Value>& a) {
    std::vector<Value> next{Add(a[0], ir::IntegerConstant(1, DType::kS64))};
    for (Value& v : body(a[0], std::vector<Value>(a.begin() + 1, a.end()))) next.push_back(v);
    return next;
  });
  std::vector<Value> results = ir::MakeMultiOp("stablehlo.while", initial, types, "",
                                               {std::move(condition), std::move(step)});
  return std::vector<Value>(results.begin() + 1, results.end());
}

// What both directions need: the extended label sequence's log-probabilities and masks.
struct Problem {
  int64_t steps = 0, batch = 0, positions = 0;  // T, B, S = 2 * max_L + 1
  Value emit;                                   // [T, B, S] log_probs at each s's label
  Value labels;                                 // s64 [B, S]: blank, l1, blank, l2, ...
  Value skip;    // bool [B, S]: s - 2 -> s allowed (s >= 2 and a label change)
  Value valid;   // bool [B, S]: s <= 2 * target_length
  Value length;  // s64 [B, 1]: input lengths
  std::vector<int64_t> input_lengths, target_lengths;
};

// Gathers targets (any rank, flattened) at constant flat positions [B, S].
Value TakeTargets(const Value& targets, const std::vector<int64_t>& flat, const Shape& shape) {
  const int64_t n = ir::NumElements(targets.shape()), m = static_cast<int64_t>(flat.size());
  const Value points = I64Constant(flat, {m, 1});
  const Value taken = ir::MakeOp(
      "stablehlo.gather", {Convert(Reshape(targets, {n}), DType::kS64), points},
      TensorType{DType::kS64, {m}},
      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
      "index_vector_dim = 1>, slice_sizes = array<i64: 1>");
  return Reshape(taken, shape);
}

Problem MakeProblem(const LoweringContext& ctx, int64_t positions, DType t) {
  Problem p;
  // The backward's arguments are the forward's shifted by its leading grad.
  const size_t first = ctx.name == "_ctc_loss" ? 0 : 1;
  const Value log_probs = Convert(ctx.tensor(first), t);
  const Value targets = ctx.tensor(first + 1);
  p.input_lengths = ctx.int_list(first + 2);
  p.target_lengths = ctx.int_list(first + 3);
  const int64_t blank = first == 0 ? ctx.int_arg(4, 0) : ctx.int_arg(7);
  p.steps = log_probs.shape()[0];
  p.batch = log_probs.shape()[1];
  p.positions = positions;
  const int64_t b_count = p.batch, s_count = positions;
  // Each odd s names target element (s - 1) / 2 of its batch element: its flat position.
  std::vector<int64_t> flat(b_count * s_count, 0), is_label(b_count * s_count, 0), twice(b_count);
  int64_t offset = 0;
  for (int64_t b = 0; b < b_count; ++b) {
    const int64_t length = p.target_lengths.at(b);
    const int64_t start = targets.rank() == 2 ? b * targets.shape()[1] : offset;
    for (int64_t k = 0; k < length && 2 * k + 1 < s_count; ++k) {
      flat[b * s_count + 2 * k + 1] = start + k;
      is_label[b * s_count + 2 * k + 1] = 1;
    }
    offset += length;
    twice[b] = 2 * length;
  }
  const Shape bs{b_count, s_count};
  const Value blanks = Constant(static_cast<double>(blank), DType::kS64, bs);
  p.labels = ir::NumElements(targets.shape()) == 0
                 ? blanks
                 : Select(Compare(I64Constant(is_label, bs), ConstantLike(1, blanks), "EQ"),
                          TakeTargets(targets, flat, bs), blanks);
  const Value s_index = Iota(TensorType{DType::kS64, bs}, 1);
  p.valid = Compare(s_index, BroadcastInDim(I64Constant(twice, {b_count}), bs, {0}), "LE");
  const Value before =
      Pad(SliceAxis(p.labels, 1, 0, std::max<int64_t>(s_count - 2, 0)),
          ir::IntegerConstant(-1, DType::kS64), {0, std::min<int64_t>(2, s_count)}, {0, 0}, {0, 0});
  p.skip = And(Compare(s_index, ConstantLike(2, s_index), "GE"), Compare(p.labels, before, "NE"));
  p.length = I64Constant(p.input_lengths, {b_count, 1});
  // emit[t, b, s] = log_probs[t, b, labels[b, s]]: gather rows (b, label) of [B, C, T].
  const Value by_label = Transpose(log_probs, {1, 2, 0});
  const Value points = Concatenate({Iota(TensorType{DType::kS64, {b_count, s_count, 1}}, 0),
                                    Reshape(p.labels, {b_count, s_count, 1})},
                                   2);
  const Value rows = ir::MakeOp(
      "stablehlo.gather", {by_label, points}, TensorType{t, {b_count, s_count, p.steps}},
      "dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0, 1], "
      "start_index_map = [0, 1], index_vector_dim = 2>, slice_sizes = " +
          ir::I64Array({1, 1, p.steps}));
  p.emit = Transpose(rows, {2, 0, 1});
  return p;
}

// log_alpha [T, B, S]: alpha_0 holds the first blank and label; each later step adds the paths
// from s, s - 1 and (across a label change) s - 2. Rows at or past an input length are -inf.
Value Alphas(const Problem& p) {
  const Value first = DynamicRow(p.emit, ir::IntegerConstant(0, DType::kS64));
  const Value s_index = Iota(TensorType{DType::kS64, first.shape()}, 1);
  const Value starts =
      And(And(p.valid, Compare(s_index, ConstantLike(1, s_index), "LE")),
          Compare(BroadcastTo(p.length, first.shape()), ConstantLike(0, s_index), "GT"));
  const Value alpha0 = Select(starts, first, NegInfLike(first));
  const Value table = SetRow(NegInfLike(p.emit), alpha0, ir::IntegerConstant(0, DType::kS64));
  auto step = [&](const Value& i, const std::vector<Value>& v) {
    const Value &emit = v[0], &skip = v[1], &valid = v[2], &length = v[3], &prev = v[4];
    const Value t = Add(i, ir::IntegerConstant(1, DType::kS64));
    const Value from_skip = Select(skip, ShiftS(prev, 2), NegInfLike(prev));
    const Value next = Add(LogSumExp({prev, ShiftS(prev, 1), from_skip}), DynamicRow(emit, t));
    const Value live =
        And(valid, Compare(BroadcastTo(t, prev.shape()), BroadcastTo(length, prev.shape()), "LT"));
    const Value row = Select(live, next, NegInfLike(next));
    return std::vector<Value>{emit, skip, valid, length, row, SetRow(v[5], row, t)};
  };
  return ForLoop(p.steps - 1, {p.emit, p.skip, p.valid, p.length, alpha0, table}, step)[5];
}

// log_beta [T, B, S], from each element's last input step down: it starts at the last blank and
// label, then adds the paths to s, s + 1 and (across a label change) s + 2.
Value Betas(const Problem& p) {
  const Shape bs{p.batch, p.positions};
  const Value s_index = Iota(TensorType{DType::kS64, bs}, 1);
  std::vector<int64_t> twice;
  for (int64_t length : p.target_lengths) twice.push_back(2 * length);
  const Value last = BroadcastInDim(I64Constant(twice, {p.batch}), bs, {0});
  const Value final_s =
      And(Compare(s_index, Sub(last, ConstantLike(1, last)), "GE"), Compare(s_index, last, "LE"));
  const Value skip_ahead = ShiftS(p.skip, -2, ir::IntegerConstant(0, DType::kBool));
  auto step = [&](const Value& i, const std::vector<Value>& v) {
    const Value &emit = v[0], &skip = v[1], &valid = v[2], &length = v[3], &ends = v[4];
    const Value& next = v[5];
    const Value t = Sub(ir::IntegerConstant(p.steps - 1, DType::kS64), i);
    const Value e = DynamicRow(emit, t);
    const Value from_skip = Select(skip, ShiftS(next, -2), NegInfLike(next));
    const Value summed = Add(LogSumExp({next, ShiftS(next, -1), from_skip}), e);
    const Value lengths = BroadcastTo(length, next.shape());
    const Value t_row = BroadcastTo(t, next.shape());
    const Value one = ConstantLike(1, lengths);
    const Value at_end = Compare(t_row, Sub(lengths, one), "EQ");
    const Value before_end = Compare(t_row, Sub(lengths, one), "LT");
    Value row = Select(And(at_end, ends), e, NegInfLike(e));
    row = Select(And(before_end, valid), summed, row);
    return std::vector<Value>{emit, skip, valid, length, ends, row, SetRow(v[6], row, t)};
  };
  const Value start = Constant(-kInf, p.emit.dtype(), bs);
  // skip_ahead[s] says s -> s + 2 is allowed: the skip flag of s + 2.
  return ForLoop(p.steps,
                 {p.emit, skip_ahead, p.valid, p.length, final_s, start, NegInfLike(p.emit)},
                 step)[6];
}

// _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity).
std::vector<Value> CtcLossLowering(LoweringContext& ctx) {
  if (ctx.arg(2).kind != Argument::Kind::kIntList)
    throw UnsupportedError("_ctc_loss with tensor lengths");
  const TensorType& alpha_type = ctx.output(1);
  const DType t = OpMathType(alpha_type.dtype);
  const Problem p = MakeProblem(ctx, alpha_type.shape[2], t);
  // The CPU kernel's check (the meta function lacks it).
  if (ir::NumElements(ctx.tensor(0).shape()) == 0)
    throw std::invalid_argument("log_probs tensor must not be empty");
  const Value alphas = Alphas(p);  // [T, B, S]
  // The likelihood: the last blank and last label at each element's last input step.
  std::vector<int64_t> last_t, last_s, label_s, has_label, has_input;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t steps = p.input_lengths.at(b), length = p.target_lengths.at(b);
    last_t.push_back(b * p.steps + std::max<int64_t>(steps - 1, 0));
    last_s.push_back(2 * length);
    label_s.push_back(std::max<int64_t>(2 * length - 1, 0));
    has_label.push_back(length > 0);
    has_input.push_back(steps > 0);
  }
  const Value by_batch = Reshape(Transpose(alphas, {1, 0, 2}), {p.batch * p.steps, p.positions});
  auto take = [&](const std::vector<int64_t>& s) {
    const Value points =
        Concatenate({I64Constant(last_t, {p.batch, 1}), I64Constant(s, {p.batch, 1})}, 1);
    return ir::MakeOp("stablehlo.gather", {by_batch, points}, TensorType{t, {p.batch}},
                      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], "
                      "start_index_map = [0, 1], index_vector_dim = 1>, slice_sizes = "
                      "array<i64: 1, 1>");
  };
  const Value ones = ir::IntegerConstant(1, DType::kS64);
  const Value l1 = take(last_s);
  const Value l2 =
      Select(Compare(I64Constant(has_label, {p.batch}), ones, "EQ"), take(label_s), NegInfLike(l1));
  const Value nll = Neg(LogSumExp({l1, l2}));
  // No input steps: likelihood 1 for an empty target, 0 otherwise.
  const Value empty = Select(Compare(I64Constant(has_label, {p.batch}), ones, "EQ"),
                             ConstantLike(kInf, nll), ConstantLike(-0.0, nll));
  const Value result = Select(Compare(I64Constant(has_input, {p.batch}), ones, "EQ"), nll, empty);
  return {Convert(result, ctx.output(0).dtype),
          Convert(Transpose(alphas, {1, 0, 2}), alpha_type.dtype)};
}

// Sums exp(values) [T, B, S] into [T, B, C] by label, in log space against each (t, b)'s max.
Value LogSumByLabel(const Value& values, const Value& labels, int64_t classes) {
  const int64_t steps = values.shape()[0], batch = values.shape()[1], s = values.shape()[2];
  Value m = Reduce(values, {2}, "stablehlo.maximum", Constant(-kInf, values.dtype()));
  m = Select(Compare(m, NegInfLike(m), "EQ"), ConstantLike(0, m), m);
  const Value shifted = Exp(Sub(values, BroadcastInDim(m, values.shape(), {0, 1})));
  const Shape point_shape{steps, batch, s, 1};
  const TensorType coordinate{DType::kS64, point_shape};
  const Value points = Concatenate(
      {Iota(coordinate, 0), Iota(coordinate, 1), BroadcastInDim(labels, point_shape, {1, 2})}, 3);
  const TensorType scalar{values.dtype(), {}};
  auto add = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{Add(a[0], a[1])};
  });
  const Shape out{steps, batch, classes};
  const Value sums = ir::MakeMultiOp(
      "stablehlo.scatter", {Constant(0, values.dtype(), out), points, shifted},
      {TensorType{values.dtype(), out}},
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1, 2], "
      "scatter_dims_to_operand_dims = [0, 1, 2], index_vector_dim = 3>",
      {std::move(add)})[0];
  return Add(Log(sums), BroadcastInDim(m, out, {0, 1}));
}

// _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood,
// log_alpha, blank, zero_infinity): exp(lp) - exp(log(sum alpha*beta over s with the label)
// + nll - lp), times grad, for t below the input length; 0 for zero_infinity's infinite losses.
std::vector<Value> CtcLossBackwardLowering(LoweringContext& ctx) {
  if (ctx.arg(3).kind != Argument::Kind::kIntList)
    throw UnsupportedError("_ctc_loss_backward with tensor lengths");
  const TensorType& out = ctx.output();
  const DType t = OpMathType(out.dtype);
  const Value log_alpha = Convert(ctx.tensor(6), t);
  const Problem p = MakeProblem(ctx, log_alpha.shape()[2], t);
  const int64_t classes = out.shape[2];
  const Shape tbs{p.steps, p.batch, p.positions}, tbc{p.steps, p.batch, classes};
  const Value alphas = Transpose(log_alpha, {1, 0, 2});
  const Value time = Iota(TensorType{DType::kS64, tbs}, 0);
  const Value live =
      And(BroadcastInDim(p.valid, tbs, {1, 2}),
          Compare(time, BroadcastInDim(Reshape(p.length, {p.batch}), tbs, {1}), "LT"));
  const Value products = Select(live, Add(alphas, Betas(p)), NegInfLike(alphas));
  const Value collected = LogSumByLabel(products, p.labels, classes);
  const Value log_probs = Convert(ctx.tensor(1), t);
  const Value nll = BroadcastInDim(Convert(ctx.tensor(5), t), tbc, {1});
  const Value grad_out = BroadcastInDim(Reshape(Convert(ctx.tensor(0), t), {p.batch}), tbc, {1});
  Value grad = Mul(Sub(Exp(log_probs), Exp(Sub(Add(collected, nll), log_probs))), grad_out);
  const Value steps_tbc = Iota(TensorType{DType::kS64, tbc}, 0);
  Value keep = Compare(steps_tbc, BroadcastInDim(Reshape(p.length, {p.batch}), tbc, {1}), "LT");
  if (ctx.bool_arg(8)) keep = And(keep, Compare(nll, ConstantLike(kInf, nll), "NE"));
  return {Convert(Select(keep, grad, ConstantLike(0, grad)), out.dtype)};
}

LoweringRegistrar registrar({
    {"_ctc_loss", CtcLossLowering},
    {"_ctc_loss_backward", CtcLossBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
