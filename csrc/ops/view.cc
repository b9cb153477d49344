// Strided views over a storage's 1-D value. Common layouts lower to dynamic_slice, reshape, slice,
// transpose and broadcast_in_dim; only overlapping or irregular layouts fall back to
// gather/scatter.
#include <algorithm>
#include <numeric>

#include "ops/builder.h"

namespace torch_tpu::ops {

namespace {

struct Dim {
  int64_t size;
  int64_t stride;
  int64_t axis;  // position in the view's sizes
};

// The view's dims with size > 1, sorted by decreasing stride.
std::vector<Dim> RealDims(const Shape& sizes, const std::vector<int64_t>& strides,
                          bool* has_broadcast) {
  std::vector<Dim> dims;
  *has_broadcast = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (strides[i] == 0) {
      *has_broadcast = true;
      continue;
    }
    dims.push_back(Dim{sizes[i], strides[i], static_cast<int64_t>(i)});
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  return dims;
}

// Each dim fits inside one step of the next-outer one, and strides divide: reshape + slice works.
bool IsNested(const std::vector<Dim>& dims) {
  for (size_t j = 0; j + 1 < dims.size(); ++j) {
    if (dims[j].stride % dims[j + 1].stride != 0) return false;
    if (dims[j + 1].size * dims[j + 1].stride > dims[j].stride) return false;
  }
  return true;
}

// No two elements share a storage element: each stride (in decreasing order) exceeds the reach of
// all the smaller-stride dims. A sufficient check; PyTorch's own overlap check gives up on the
// layouts it cannot prove, and then lets the write through.
bool IsProvablyUnique(const std::vector<Dim>& dims) {
  int64_t reach = 0;
  for (auto dim = dims.rbegin(); dim != dims.rend(); ++dim) {
    if (dim->stride <= reach) return false;
    reach += (dim->size - 1) * dim->stride;
  }
  return true;
}

int64_t Span(const std::vector<Dim>& dims) {
  int64_t span = 1;
  for (const Dim& d : dims) span += (d.size - 1) * d.stride;
  return span;
}

Value ZeroIndex() { return ir::IntegerConstant(0, DType::kS64); }

Value DynamicSlice(const Value& value, const Value& start, int64_t length) {
  return ir::MakeOp("stablehlo.dynamic_slice", {value, start}, TensorType{value.dtype(), {length}},
                    "slice_sizes = " + ir::I64Array({length}));
}

Value DynamicUpdateSlice(const Value& value, const Value& update,
                         const std::vector<Value>& starts) {
  std::vector<Value> operands = {value, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return ir::MakeOp("stablehlo.dynamic_update_slice", operands, value.type());
}

// Pads a 1-D value at its end so a block of `extent` from any valid offset stays in bounds.
Value PadEnd(const Value& storage, int64_t amount) {
  if (amount <= 0) return storage;
  return Pad(storage, ConstantLike(0, Reshape(SliceAxis(storage, 0, 0, 1), {})), {0}, {amount},
             {0});
}

// The block shape [size_0, stride_0/stride_1, ..., stride_{k-1}] viewed from the outermost dim.
Shape BlockShape(const std::vector<Dim>& dims) {
  Shape shape = {dims[0].size};
  for (size_t j = 0; j + 1 < dims.size(); ++j) shape.push_back(dims[j].stride / dims[j + 1].stride);
  shape.push_back(dims.back().stride);
  return shape;
}

// Flat element indices (i64, shape `sizes`) of a general strided view.
Value ElementIndices(const Shape& sizes, const std::vector<int64_t>& strides, const Value& offset) {
  TensorType type{DType::kS64, sizes};
  Value indices = BroadcastTo(offset, sizes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1 || strides[i] == 0) continue;
    indices = Add(indices, Mul(Iota(type, static_cast<int64_t>(i)),
                               Constant(static_cast<double>(strides[i]), DType::kS64)));
  }
  return indices;
}

std::string ScalarGatherDims(int64_t index_vector_dim) {
  return "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
         "index_vector_dim = " +
         std::to_string(index_vector_dim) + ">, slice_sizes = array<i64: 1>";
}

}  // namespace

bool CoversWholeStorage(int64_t storage_elements, const Shape& sizes,
                        const std::vector<int64_t>& strides) {
  if (ir::NumElements(sizes) != storage_elements) return false;
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

namespace {
// Complex values have no bitcast in StableHLO; in memory each is its (real, imag) f32 pair, the
// CPU's layout, so a storage is reinterpreted through that pair view.
Value ComplexToPairs(const Value& z) {
  const int64_t n = z.shape()[0];
  return Reshape(Concatenate({Reshape(Real(z), {n, 1}), Reshape(Imag(z), {n, 1})}, 1), {2 * n});
}
Value PairsToComplex(const Value& pairs) {
  const int64_t n = pairs.shape()[0] / 2;
  Value grid = Reshape(SliceAxis(pairs, 0, 0, 2 * n), {n, 2});
  return MakeComplex(Reshape(SliceAxis(grid, 1, 0, 1), {n}),
                     Reshape(SliceAxis(grid, 1, 1, 2), {n}));
}
}  // namespace

Value Reinterpret1D(const Value& value, DType dtype) {
  const DType from = value.dtype();
  if (from == dtype) return value;
  if (ir::IsComplex(from)) return Reinterpret1D(ComplexToPairs(value), dtype);
  if (ir::IsComplex(dtype)) return PairsToComplex(Reinterpret1D(value, DType::kF32));
  if (from == DType::kBool || dtype == DType::kBool)
    return Convert(Convert(value, DType::kU8), dtype);
  const size_t from_size = ir::ByteSize(from), to_size = ir::ByteSize(dtype);
  const int64_t n = value.shape()[0];
  if (from_size == to_size)
    return ir::MakeOp("stablehlo.bitcast_convert", {value}, TensorType{dtype, {n}});
  if (from_size > to_size) {
    const int64_t ratio = static_cast<int64_t>(from_size / to_size);
    Value split = ir::MakeOp("stablehlo.bitcast_convert", {value}, TensorType{dtype, {n, ratio}});
    return Reshape(split, {n * ratio});
  }
  const int64_t ratio = static_cast<int64_t>(to_size / from_size);
  const int64_t whole = n / ratio;
  Value trimmed = n % ratio ? SliceAxis(value, 0, 0, whole * ratio) : value;
  return ir::MakeOp("stablehlo.bitcast_convert", {Reshape(trimmed, {whole, ratio})},
                    TensorType{dtype, {whole}});
}

Value ReadView(const Value& storage_value, DType dtype, const Shape& sizes,
               const std::vector<int64_t>& strides, const Value& offset) {
  const Value storage = Reinterpret1D(storage_value, dtype);
  const int64_t n = storage.shape()[0];
  if (ir::NumElements(sizes) == 0) return Constant(0, dtype, sizes);
  if (CoversWholeStorage(n, sizes, strides)) return Reshape(storage, sizes);

  bool has_broadcast = false;
  std::vector<Dim> dims = RealDims(sizes, strides, &has_broadcast);
  if (!IsNested(dims)) {
    Value indices = Reshape(ElementIndices(sizes, strides, offset), [&] {
      Shape s = sizes;
      s.push_back(1);
      return s;
    }());
    return ir::MakeOp("stablehlo.gather", {storage, indices}, TensorType{dtype, sizes},
                      ScalarGatherDims(static_cast<int64_t>(sizes.size())));
  }
  Value compact;  // the real dims, in sorted order
  Shape sorted_sizes;
  if (dims.empty()) {
    compact = Reshape(DynamicSlice(storage, offset, 1), {});
  } else {
    const Shape block_shape = BlockShape(dims);
    const int64_t extent = ir::NumElements(block_shape);
    Value block =
        Reshape(DynamicSlice(PadEnd(storage, extent - Span(dims)), offset, extent), block_shape);
    std::vector<int64_t> limits;
    for (const Dim& d : dims) {
      limits.push_back(d.size);
      sorted_sizes.push_back(d.size);
    }
    limits.push_back(1);
    block = Slice(block, std::vector<int64_t>(limits.size(), 0), limits,
                  std::vector<int64_t>(limits.size(), 1));
    compact = Reshape(block, sorted_sizes);
  }
  // Restore the view's axis order, then re-insert size-1 and broadcast dims.
  std::vector<int64_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return dims[a].axis < dims[b].axis; });
  compact = Transpose(compact, order);
  std::vector<int64_t> target_dims;
  for (int64_t j : order) target_dims.push_back(dims[j].axis);
  return BroadcastInDim(compact, sizes, target_dims);
}

Value CompactGrowing(const Value& padded_1d, const Shape& padded_shape, int64_t dim,
                     int64_t length) {
  const Value tensor = SliceAxis(Reshape(padded_1d, padded_shape), dim, 0, length);
  return Reshape(tensor, {ir::NumElements(tensor.shape())});
}

Value WriteView(const Value& storage_value, const Value& update, const Shape& sizes,
                const std::vector<int64_t>& strides, const Value& offset) {
  const DType dtype = update.dtype();
  const DType storage_dtype = storage_value.dtype();
  const Value storage = Reinterpret1D(storage_value, dtype);
  const int64_t n = storage.shape()[0];
  auto finish = [&](const Value& written) {
    Value back = Reinterpret1D(written, storage_dtype);
    // A narrower view over a storage whose length is not a multiple keeps the storage's tail.
    if (back.shape()[0] != storage_value.shape()[0]) {
      back = Concatenate(
          {back, SliceAxis(storage_value, 0, back.shape()[0], storage_value.shape()[0])}, 0);
    }
    return back;
  };
  if (ir::NumElements(sizes) == 0) return storage_value;
  if (CoversWholeStorage(n, sizes, strides)) return finish(Reshape(update, {n}));

  bool has_broadcast = false;
  std::vector<Dim> dims = RealDims(sizes, strides, &has_broadcast);
  if (has_broadcast || !IsNested(dims)) {
    // Overlapping writes are undefined in PyTorch, but scatter's unique_indices promise must hold.
    const bool unique = !has_broadcast && IsProvablyUnique(dims);
    const int64_t count = ir::NumElements(sizes);
    Value indices = Reshape(ElementIndices(sizes, strides, offset), {count, 1});
    TensorType scalar{dtype, {}};
    auto body = ir::MakeRegion(
        {scalar, scalar}, [](const std::vector<Value>& a) { return std::vector<Value>{a[1]}; });
    return finish(ir::MakeMultiOp(
        "stablehlo.scatter", {storage, indices, Reshape(update, {count})}, {storage.type()},
        "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
        "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = " +
            std::string(unique ? "true" : "false"),
        {std::move(body)})[0]);
  }
  // Bring the update into the sorted layout.
  std::vector<int64_t> permutation;
  Shape compact_shape, sorted_sizes;
  {
    Shape squeezed;
    std::vector<int64_t> axes;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] != 1) axes.push_back(static_cast<int64_t>(i));
    }
    for (const Dim& d : dims) {
      permutation.push_back(std::find(axes.begin(), axes.end(), d.axis) - axes.begin());
      sorted_sizes.push_back(d.size);
    }
    for (int64_t a : axes) squeezed.push_back(sizes[a]);
    compact_shape = squeezed;
  }
  Value sorted_update = Transpose(Reshape(update, compact_shape), permutation);
  if (dims.empty()) {
    return finish(DynamicUpdateSlice(storage, Reshape(sorted_update, {1}), {offset}));
  }
  const Shape block_shape = BlockShape(dims);
  const int64_t extent = ir::NumElements(block_shape);
  Shape update_block_shape = sorted_sizes;
  update_block_shape.push_back(1);
  if (update_block_shape == block_shape) {
    // The view is a contiguous range of the storage.
    return finish(DynamicUpdateSlice(storage, Reshape(sorted_update, {extent}), {offset}));
  }
  const int64_t padding = extent - Span(dims);
  Value padded = PadEnd(storage, padding);
  Value block = Reshape(DynamicSlice(padded, offset, extent), block_shape);
  block = DynamicUpdateSlice(block, Reshape(sorted_update, update_block_shape),
                             std::vector<Value>(block_shape.size(), ZeroIndex()));
  Value written = DynamicUpdateSlice(padded, Reshape(block, {extent}), {offset});
  if (padding > 0) written = SliceAxis(written, 0, 0, n);
  return finish(written);
}

}  // namespace torch_tpu::ops
