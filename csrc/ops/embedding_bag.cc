// Lowerings for F.embedding_bag: _embedding_bag and _embedding_bag_forward_only (modes sum, mean,
// max; per_sample_weights, include_last_offset, padding_idx) and the dense backward ops autograd
// calls: _embedding_bag_backward, _embedding_bag_dense_backward and
// _embedding_bag_per_sample_weights_backward.
//
// Offsets are data, so the bag of each index is computed on device: the number of bag starts at
// or before its position, less one (empty bags are starts that a later start repeats). As on
// the CPU, include_last_offset only drops the last offset as a bag start. Rows are gathered
// and scatter-combined into their bags; reads of out-of-range indices are clamped, and a
// device-side check raises the CPU's error for them at the next synchronization
// (aten/device_checks.h).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

Value I64(const Value& x) { return Convert(x, DType::kS64); }

// The accumulation dtype: f32 for half precision, as on the CPU.
DType Accumulation(DType dtype) { return OpMathType(dtype); }

// Rows `rows` [n] of `table` [R, D...] -> [n, D...].
Value GatherRows(const Value& table, const Value& rows) {
  const int64_t n = rows.shape()[0];
  Shape shape = table.shape(), slice = table.shape();
  shape[0] = n;
  slice[0] = 1;
  std::vector<int64_t> offset_dims;
  for (int64_t i = 1; i < table.rank(); ++i) offset_dims.push_back(i);
  return ir::MakeOp(
      "stablehlo.gather", {table, Reshape(rows, {n, 1})}, TensorType{table.dtype(), shape},
      "dimension_numbers = #stablehlo.gather<offset_dims = " + ir::I64List(offset_dims) +
          ", collapsed_slice_dims = [0], start_index_map = [0], "
          "index_vector_dim = 1>, slice_sizes = " +
          ir::I64Array(slice));
}

Value GatherElements(const Value& vector, const Value& positions) {
  return Reshape(GatherRows(Reshape(vector, {vector.shape()[0], 1}), positions), positions.shape());
}

// Combines each row of `updates` [n, D...] into row `rows[i]` of `init`-filled [size, D...]
// with the binary op `combiner` ("stablehlo.add"); rows out of range are dropped.
Value ScatterRows(const Value& updates, const Value& rows, int64_t size,
                  const std::string& combiner, double init) {
  const int64_t n = rows.shape()[0];
  Shape shape = updates.shape();
  shape[0] = size;
  std::vector<int64_t> window_dims;
  for (int64_t i = 1; i < updates.rank(); ++i) window_dims.push_back(i);
  const TensorType scalar{updates.dtype(), {}};
  auto combine = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{ir::MakeOp(combiner, {a[0], a[1]}, scalar)};
  });
  return ir::MakeMultiOp("stablehlo.scatter",
                         {Constant(init, updates.dtype(), shape), Reshape(rows, {n, 1}), updates},
                         {TensorType{updates.dtype(), shape}},
                         "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " +
                             ir::I64List(window_dims) +
                             ", inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
                             "index_vector_dim = 1>",
                         {std::move(combine)})[0];
}

Value ScatterAddRows(const Value& updates, const Value& rows, int64_t size) {
  return ScatterRows(updates, rows, size, "stablehlo.add", 0);
}

// Broadcasts a per-row value [n] over rows [n, D].
Value PerRow(const Value& v, const Shape& rows) { return BroadcastInDim(v, rows, {0}); }

// True for indices that take part (not padding_idx; a negative padding_idx means none).
Value Participates(const Value& indices, int64_t padding_idx) {
  const Value yes = Constant(1, DType::kBool, indices.shape());
  if (padding_idx < 0) return yes;
  return Compare(indices, ir::IntegerConstant(padding_idx, DType::kS64), "NE");
}

// The bag of every index position: count of bag starts <= position, less one.
Value BagOfPositions(const Value& offsets, int64_t num_bags, int64_t n) {
  const TensorType grid{DType::kS64, {n, num_bags}};
  const Value starts = BroadcastInDim(SliceAxis(I64(offsets), 0, 0, num_bags), grid.shape, {1});
  const Value started = Convert(Compare(starts, Iota(grid, 0), "LE"), DType::kS64);
  return Sub(Reduce(started, {1}, "stablehlo.add", ir::IntegerConstant(0, DType::kS64)),
             ir::IntegerConstant(1, DType::kS64));
}

// Each bag's (maximum, first position holding it) per feature, as the CPU's in-order scan finds
// it: it starts from the bag's first element and takes a later one only if strictly larger, so
// a NaN wins only as the first element and is skipped anywhere else. That is a variadic scatter
// whose combiner prefers the one NaN left, then the larger value, then the earlier position: it
// is associative and commutative, so the scatter may combine in any order. Skipped rows (and
// the initial value) carry position n, after every real element, so any real element beats them.
std::vector<Value> BagMaxima(const Value& rows, const Value& bag, const Value& participates,
                             int64_t num_bags) {
  const int64_t n = rows.shape()[0], features = rows.shape()[1];
  const DType t = rows.dtype();
  const Shape shape{num_bags, features};
  const double last = static_cast<double>(n);
  const Value index = Iota(TensorType{DType::kS64, {n}}, 0);
  const Value first_of_bag =
      GatherElements(ScatterRows(Select(participates, index, Constant(last, DType::kS64, {n})), bag,
                                 num_bags, "stablehlo.minimum", last),
                     Max(bag, ir::IntegerConstant(0, DType::kS64)));
  const Value first = PerRow(Compare(index, first_of_bag, "EQ"), rows.shape());
  const Value skipped = Or(Not(PerRow(participates, rows.shape())), And(IsNan(rows), Not(first)));
  const Value values =
      Select(skipped, Constant(-std::numeric_limits<double>::infinity(), t, rows.shape()), rows);
  const Value positions =
      Select(skipped, Constant(last, DType::kS64, rows.shape()), PerRow(index, rows.shape()));
  const std::vector<TensorType> scalars{{t, {}}, {DType::kS64, {}}, {t, {}}, {DType::kS64, {}}};
  auto combine = ir::MakeRegion(scalars, [](const std::vector<Value>& a) {
    const Value &av = a[0], &ai = a[1], &bv = a[2], &bi = a[3];
    const Value a_first = Compare(ai, bi, "LT");
    const Value a_nan = IsNan(av), b_nan = IsNan(bv);
    Value a_wins = Or(Compare(av, bv, "GT"), And(Compare(av, bv, "EQ"), a_first));
    a_wins = Select(a_nan, Or(Not(b_nan), a_first), And(Not(b_nan), a_wins));
    return std::vector<Value>{Select(a_wins, av, bv), Select(a_wins, ai, bi)};
  });
  return ir::MakeMultiOp(
      "stablehlo.scatter",
      {Constant(-std::numeric_limits<double>::infinity(), t, shape),
       Constant(last, DType::kS64, shape), Reshape(bag, {n, 1}), values, positions},
      {TensorType{t, shape}, TensorType{DType::kS64, shape}},
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>",
      {std::move(combine)});
}

// _embedding_bag[_forward_only](weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights, include_last_offset, padding_idx) -> (output, offset2bag, bag_size,
// max_indices). bag_size counts the indices of each bag other than padding_idx (its slot for
// an include_last_offset's last offset is zero).
std::vector<Value> EmbeddingBagLowering(LoweringContext& ctx) {
  const Value weight = ctx.tensor(0), indices = I64(ctx.tensor(1)), offsets = ctx.tensor(2);
  const int64_t mode = ctx.int_arg(4, kSum);
  const int64_t padding_idx = ctx.int_arg(8, -1);
  const TensorType &out = ctx.output(0), &bag_type = ctx.output(1), &size_type = ctx.output(2);
  const int64_t num_bags = out.shape[0], features = out.shape[1];
  const int64_t n = indices.shape()[0];
  const DType t = Accumulation(weight.dtype());
  const Value max_indices_empty = Constant(0, ctx.output(3).dtype, ctx.output(3).shape);
  if (n == 0) {
    return {Constant(0, out.dtype, out.shape), Constant(0, bag_type.dtype, bag_type.shape),
            Constant(0, size_type.dtype, size_type.shape), max_indices_empty};
  }
  const Value bag = BagOfPositions(offsets, num_bags, n);
  const Value participates = Participates(indices, padding_idx);
  const Value bag_size =
      ScatterAddRows(Convert(participates, DType::kS64), bag, size_type.shape[0]);
  const Value rows = Convert(GatherRows(weight, indices), t);
  const Shape rows_shape{n, features};
  Value output, max_indices = max_indices_empty;
  if (mode == kMax && num_bags == 0) {
    output = Constant(0, t, out.shape);
  } else if (mode == kMax) {
    std::vector<Value> maxima = BagMaxima(rows, bag, participates, num_bags);
    const Value filled = PerRow(
        Compare(SliceAxis(bag_size, 0, 0, num_bags), ir::IntegerConstant(0, DType::kS64), "GT"),
        out.shape);
    output = Select(filled, maxima[0], Constant(0, t, out.shape));
    // The first position of each maximum, as the weight row it read.
    const Value first = Reshape(Select(filled, maxima[1], Constant(0, DType::kS64, out.shape)),
                                {num_bags * features});
    max_indices = Select(filled, Reshape(GatherElements(indices, first), out.shape),
                         Constant(0, DType::kS64, out.shape));
    max_indices = Convert(max_indices, ctx.output(3).dtype);
  } else {
    Value contributions = rows;
    if (ctx.has(6))
      contributions = Mul(contributions, PerRow(Convert(ctx.tensor(6), t), rows_shape));
    contributions =
        Select(PerRow(participates, rows_shape), contributions, Constant(0, t, rows_shape));
    output = ScatterAddRows(contributions, bag, num_bags);
    if (mode == kMean) {
      const Value count = Max(Convert(SliceAxis(bag_size, 0, 0, num_bags), t), Constant(1, t));
      output = Div(output, PerRow(count, out.shape));
    }
  }
  return {Convert(output, out.dtype), Convert(bag, bag_type.dtype),
          Convert(bag_size, size_type.dtype), max_indices};
}

// The weight gradient of modes sum and mean: each participating index's row receives its bag's
// gradient (divided by the bag's size for mean, scaled by its per-sample weight, and by
// 1 / its count among the indices for scale_grad_by_freq).
Value DenseBackward(const Value& grad, const Value& indices, const Value& offset2bag,
                    const Value& bag_size, const Value& max_indices, int64_t num_weights,
                    bool scale_grad_by_freq, int64_t mode, const Value* per_sample_weights,
                    int64_t padding_idx, DType result) {
  const DType t = Accumulation(grad.dtype());
  const int64_t features = grad.shape()[1];
  const Value g = Convert(grad, t);
  if (mode == kMax) {
    // Each feature's gradient goes to the row its maximum came from; empty bags give nothing.
    const int64_t num_bags = grad.shape()[0];
    const Shape shape{num_bags, features};
    const Value filled = PerRow(Compare(SliceAxis(I64(bag_size), 0, 0, num_bags),
                                        ir::IntegerConstant(0, DType::kS64), "GT"),
                                shape);
    const Value row = Select(filled, I64(max_indices),
                             Constant(static_cast<double>(num_weights), DType::kS64, shape));
    const Value points =
        Concatenate({Reshape(row, {num_bags, features, 1}),
                     Reshape(Iota(TensorType{DType::kS64, shape}, 1), {num_bags, features, 1})},
                    2);
    const TensorType scalar{t, {}};
    auto add = ir::MakeRegion({scalar, scalar}, [](const std::vector<Value>& a) {
      return std::vector<Value>{Add(a[0], a[1])};
    });
    const Shape weight_shape{num_weights, features};
    return Convert(
        ir::MakeMultiOp("stablehlo.scatter", {Constant(0, t, weight_shape), points, g},
                        {TensorType{t, weight_shape}},
                        "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
                        "[0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 2>",
                        {std::move(add)})[0],
        result);
  }
  const Value index = I64(indices);
  const int64_t n = index.shape()[0];
  const Shape rows_shape{n, features};
  const Value bag = I64(offset2bag);
  Value rows = GatherRows(g, bag);
  Value scale = Constant(1, t, {n});
  if (mode == kMean) {
    scale = Div(scale, Max(Convert(GatherElements(I64(bag_size), bag), t), Constant(1, t)));
  }
  if (per_sample_weights != nullptr) scale = Mul(scale, Convert(*per_sample_weights, t));
  if (scale_grad_by_freq) {
    const Value counts = ScatterAddRows(Constant(1, t, {n}), index, num_weights);
    scale = Div(scale, GatherElements(counts, index));
  }
  rows = Mul(rows, PerRow(scale, rows_shape));
  rows = Select(PerRow(Participates(index, padding_idx), rows_shape), rows,
                Constant(0, t, rows_shape));
  return Convert(ScatterAddRows(rows, index, num_weights), result);
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
// num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx)
std::vector<Value> EmbeddingBagBackwardLowering(LoweringContext& ctx) {
  if (ctx.bool_arg(9)) throw UnsupportedError("sparse gradients of embedding_bag");
  const Value grad = ctx.tensor(0);
  const Value weights = ctx.has(10) ? ctx.tensor(10) : Value{};
  return {DenseBackward(grad, ctx.tensor(1), ctx.tensor(3), ctx.tensor(4), ctx.tensor(5),
                        ctx.int_arg(6), ctx.bool_arg(7), ctx.int_arg(8),
                        weights ? &weights : nullptr, ctx.int_arg(11, -1), ctx.output().dtype)};
}

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
// num_weights, scale_grad_by_freq, mode, per_sample_weights, padding_idx)
std::vector<Value> EmbeddingBagDenseBackwardLowering(LoweringContext& ctx) {
  const Value weights = ctx.has(8) ? ctx.tensor(8) : Value{};
  return {DenseBackward(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2), ctx.tensor(3), ctx.tensor(4),
                        ctx.int_arg(5), ctx.bool_arg(6), ctx.int_arg(7),
                        weights ? &weights : nullptr, ctx.int_arg(9, -1), ctx.output().dtype)};
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
// padding_idx): each index's bag gradient dotted with its weight row (zero for padding_idx).
std::vector<Value> PerSampleWeightsBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0), weight = ctx.tensor(1), indices = I64(ctx.tensor(2));
  const int64_t padding_idx = ctx.int_arg(6, -1);
  const DType t = Accumulation(grad.dtype());
  const Value products = Mul(GatherRows(Convert(grad, t), I64(ctx.tensor(4))),
                             GatherRows(Convert(weight, t), indices));
  const Value dots = Reduce(products, {1}, "stablehlo.add", Constant(0, t));
  const Value result =
      Select(Participates(indices, padding_idx), dots, Constant(0, t, dots.shape()));
  return {Convert(result, ctx.output().dtype)};
}

LoweringRegistrar registrar({
    {"_embedding_bag", EmbeddingBagLowering},
    {"_embedding_bag_forward_only", EmbeddingBagLowering},
    {"_embedding_bag_backward", EmbeddingBagBackwardLowering},
    {"_embedding_bag_dense_backward", EmbeddingBagDenseBackwardLowering},
    {"_embedding_bag_per_sample_weights_backward", PerSampleWeightsBackwardLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
