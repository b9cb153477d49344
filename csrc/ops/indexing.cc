// Lowerings for the indexing and tensor-manipulation family: cat, flip, roll, tril/triu, and the
// gather/scatter ops (index, index_put, index_select, gather, scatter*, take, put, index_add,
// index_copy, index_fill).
//
// Indices are data: the lowerings themselves follow XLA's gather (an index out of range is clamped
// into range) and scatter (the update is dropped). aten/device_checks.h records OutOfRangeIndex
// beside them and raises the CPU's error at the next synchronization. Negative indices wrap where
// PyTorch accepts them (x[idx], index_put, take, put).
#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "ops/builder.h"
#include "ops/growing.h"
#include "ops/matrix.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

Value ToIndex(const Value& index) { return Convert(index, DType::kS64); }

// index < 0 ? index + size : index, for ops whose negative indices count from the end.
Value WrapNegative(const Value& index, int64_t size) {
  Value negative = Compare(index, ConstantLike(0, index), "LT");
  return Select(negative, Add(index, ConstantLike(static_cast<double>(size), index)), index);
}

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> range(std::max<int64_t>(end - begin, 0));
  std::iota(range.begin(), range.end(), begin);
  return range;
}

// Advanced indexing of `operand`: `points` ([batch..., k], s64) name, per point, one position
// along each of `axes`; every other axis is taken whole. In the gathered value (and in the
// updates of a scatter) the batch dims sit at `position`, the whole axes around them in order.
struct IndexedAccess {
  Value points;
  std::vector<int64_t> axes;
  int64_t position = 0;

  Shape batch() const {
    Shape shape = points.shape();
    shape.pop_back();
    return shape;
  }
  int64_t batch_rank() const { return points.rank() - 1; }
  // Offset dims of the gathered value (update window dims of a scatter).
  std::vector<int64_t> WindowDims(const Value& operand) const {
    const int64_t rank = operand.rank() - static_cast<int64_t>(axes.size()) + batch_rank();
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < rank; ++i) {
      if (i < position || i >= position + batch_rank()) dims.push_back(i);
    }
    return dims;
  }
  std::vector<int64_t> SortedAxes() const {
    std::vector<int64_t> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  bool IsIndexed(int64_t axis) const {
    return std::find(axes.begin(), axes.end(), axis) != axes.end();
  }
  Shape ResultShape(const Value& operand) const {
    Shape whole;
    for (int64_t i = 0; i < operand.rank(); ++i) {
      if (!IsIndexed(i)) whole.push_back(operand.shape()[i]);
    }
    Shape shape(whole.begin(), whole.begin() + position);
    for (int64_t d : batch()) shape.push_back(d);
    shape.insert(shape.end(), whole.begin() + position, whole.end());
    return shape;
  }
};

// Stacks same-shaped s64 index arrays into points [shape..., k].
Value StackPoints(const std::vector<Value>& indices) {
  Shape point_shape = indices.at(0).shape();
  point_shape.push_back(1);
  std::vector<Value> columns;
  for (const Value& index : indices) columns.push_back(Reshape(index, point_shape));
  return Concatenate(columns, static_cast<int64_t>(point_shape.size()) - 1);
}

// Points naming every axis of `operand`: `index` along `dim`, the point's own position elsewhere
// (the addressing of gather/scatter along one dim).
IndexedAccess AlongDim(const Value& operand, const Value& index, int64_t dim) {
  std::vector<Value> coordinates;
  for (int64_t d = 0; d < operand.rank(); ++d) {
    coordinates.push_back(d == dim ? ToIndex(index)
                                   : Iota(TensorType{DType::kS64, index.shape()}, d));
  }
  return IndexedAccess{StackPoints(coordinates), Range(0, operand.rank()), 0};
}

// One index (1-D) selecting positions along `dim`; the selection replaces that dim in place.
IndexedAccess SelectDim(const Value& index, int64_t dim) {
  const Value flat = Reshape(ToIndex(index), {ir::NumElements(index.shape())});
  return IndexedAccess{StackPoints({flat}), {dim}, dim};
}

Value Gather(const Value& operand, const IndexedAccess& access) {
  Shape slice_sizes = operand.shape();
  for (int64_t axis : access.axes) slice_sizes[axis] = 1;
  const std::vector<int64_t> window = access.WindowDims(operand);
  std::string numbers = "dimension_numbers = #stablehlo.gather<";
  if (!window.empty()) numbers += "offset_dims = " + ir::I64List(window) + ", ";
  numbers += "collapsed_slice_dims = " + ir::I64List(access.SortedAxes()) +
             ", start_index_map = " + ir::I64List(access.axes) +
             ", index_vector_dim = " + std::to_string(access.batch_rank()) +
             ">, slice_sizes = " + ir::I64Array(slice_sizes);
  return ir::MakeOp("stablehlo.gather", {operand, access.points},
                    TensorType{operand.dtype(), access.ResultShape(operand)}, numbers);
}

// Combines an operand element with an update: empty `op` replaces it.
Value Scatter(const Value& operand, const IndexedAccess& access, const Value& updates,
              const std::string& op) {
  TensorType scalar{operand.dtype(), {}};
  auto body = ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& a) {
    return std::vector<Value>{op.empty() ? a[1] : ir::MakeOp(op, {a[0], a[1]}, scalar)};
  });
  const std::vector<int64_t> window = access.WindowDims(operand);
  std::string numbers = "scatter_dimension_numbers = #stablehlo.scatter<";
  if (!window.empty()) numbers += "update_window_dims = " + ir::I64List(window) + ", ";
  numbers += "inserted_window_dims = " + ir::I64List(access.SortedAxes()) +
             ", scatter_dims_to_operand_dims = " + ir::I64List(access.axes) +
             ", index_vector_dim = " + std::to_string(access.batch_rank()) + ">";
  const Value shaped_updates =
      BroadcastTo(Convert(updates, operand.dtype()), access.ResultShape(operand));
  return ir::MakeMultiOp("stablehlo.scatter", {operand, access.points, shaped_updates},
                         {operand.type()}, numbers, {std::move(body)})[0];
}

// The scatter combiner for a reduction name; bool has no arithmetic, so sums become "or".
std::string Combiner(const std::string& reduce, DType dtype) {
  const bool logical = dtype == DType::kBool;
  if (reduce == "sum" || reduce == "add" || reduce == "mean")
    return logical ? "stablehlo.or" : "stablehlo.add";
  if (reduce == "prod" || reduce == "multiply")
    return logical ? "stablehlo.and" : "stablehlo.multiply";
  if (reduce == "amax") return logical ? "stablehlo.or" : "stablehlo.maximum";
  if (reduce == "amin") return logical ? "stablehlo.and" : "stablehlo.minimum";
  throw UnsupportedError("reduce '" + reduce + "'");
}

// The value that leaves any element unchanged under `reduce`.
Value Identity(const std::string& reduce, DType dtype) {
  if (reduce == "prod") return ir::IntegerConstant(1, dtype);
  if (reduce != "amax" && reduce != "amin") return ir::IntegerConstant(0, dtype);
  const bool lowest = reduce == "amax";
  if (ir::IsFloating(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    return ir::ScalarConstant(lowest ? -inf : inf, dtype);
  }
  if (dtype == DType::kBool) return ir::IntegerConstant(lowest ? 0 : 1, dtype);
  const int bits = static_cast<int>(ir::ByteSize(dtype) * 8);
  if (ir::IsUnsignedInteger(dtype)) {
    // -1 is the all-ones pattern, the largest value of every unsigned width.
    return ir::IntegerConstant(lowest ? 0 : -1, dtype);
  }
  const int64_t max = static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
  return ir::IntegerConstant(lowest ? -max - 1 : max, dtype);
}

// a / b rounded toward negative infinity, for integers with b > 0.
Value FloorDivide(const Value& a, const Value& b) {
  Value quotient = Div(a, b);
  Value inexact = Compare(Mul(quotient, b), a, "NE");
  Value negative = Compare(a, ConstantLike(0, a), "LT");
  Value adjust = Binary("stablehlo.and", inexact, negative);
  return Select(adjust, Sub(quotient, ConstantLike(1, quotient)), quotient);
}

// Ops on 0-d tensors behave as on 1-element 1-D ones.
Value AtLeast1D(const Value& v) { return v.rank() == 0 ? Reshape(v, {1}) : v; }

// ---- Lowerings ----

// cat([grown, appended], dim) in growing form (exec/bucketing.h). Onto a tensor already grown by
// appending along dim, the result is padded to a bucket and `appended` written at the runtime
// length, so the program depends on the buckets, not on the length: appending a token to a KV
// cache compiles once per bucket. Any other cat of two parts marks its result as grown, unpadded.
GrowingValue AppendedGrowing(const LoweringContext& ctx, int64_t dim, const Value& concatenated) {
  const TensorType& out = ctx.output();
  const Value& appended = ctx.arg(0).tensors[1];
  const GrowingValue grown = ctx.growing(0, 0);
  GrowingValue result;
  result.dim = dim;
  result.length = out.shape[dim];
  const int64_t bucket =
      grown && grown.dim == dim ? ctx.append_bucket(grown.length, appended.shape()[dim]) : 0;
  if (bucket == 0) {
    result.padded = concatenated;
    return result;
  }
  const Value base = Convert(grown.padded, out.dtype);
  const int64_t bucket_in = base.shape()[dim];
  std::vector<int64_t> high(out.rank(), 0);
  high[dim] = std::max(bucket, bucket_in) - bucket_in;
  const Value padded = Pad(base, Constant(0, out.dtype), std::vector<int64_t>(out.rank(), 0), high,
                           std::vector<int64_t>(out.rank(), 0));
  result.padded = DynamicUpdateSliceAt(padded, Convert(appended, out.dtype), dim,
                                       Convert(grown.length_parameter, DType::kS32));
  return result;
}

std::vector<Value> CatLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  const int64_t dim = NormalizeDim(ctx.int_arg(1, 0), out.rank());
  std::vector<Value> parts;
  // Empty inputs add nothing; this also skips legacy 1-D empties of another rank.
  for (const Value& v : ctx.arg(0).tensors) {
    if (ir::NumElements(v.shape()) > 0) parts.push_back(Convert(v, out.dtype));
  }
  Value result = Concatenate(parts, dim);
  const auto& tensors = ctx.arg(0).tensors;
  if (ctx.append_bucket != nullptr && tensors.size() == 2 && parts.size() == 2 &&
      tensors[0].rank() == out.rank() && tensors[1].rank() == out.rank()) {
    ctx.growing_results = {AppendedGrowing(ctx, dim, result)};
  }
  return {result};
}

std::vector<Value> FlipLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  if (self.rank() == 0) return {self};  // PyTorch lets a 0-d tensor flip along dim 0 or -1
  std::vector<int64_t> dims;
  for (int64_t d : ctx.int_list(1)) {
    const int64_t dim = NormalizeDim(d, self.rank());
    if (self.shape()[dim] > 1) dims.push_back(dim);  // reversing size 1 changes nothing
  }
  if (dims.empty()) return {self};
  std::sort(dims.begin(), dims.end());
  return {
      ir::MakeOp("stablehlo.reverse", {self}, self.type(), "dimensions = " + ir::I64Array(dims))};
}

Value RollAxis(const Value& value, int64_t axis, int64_t shift) {
  const int64_t size = value.shape()[axis];
  if (size == 0) return value;
  const int64_t s = ((shift % size) + size) % size;
  if (s == 0) return value;
  return Concatenate({SliceAxis(value, axis, size - s, size), SliceAxis(value, axis, 0, size - s)},
                     axis);
}

std::vector<Value> RollLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const std::vector<int64_t>& shifts = ctx.int_list(1);
  const std::vector<int64_t> dims = ctx.has(2) ? ctx.int_list(2) : std::vector<int64_t>{};
  if (dims.empty()) {
    // Without dims, roll the flattened tensor.
    Value flat = Reshape(self, {ir::NumElements(self.shape())});
    return {Reshape(RollAxis(flat, 0, shifts.at(0)), self.shape())};
  }
  for (size_t i = 0; i < dims.size(); ++i)
    self = RollAxis(self, NormalizeDim(dims[i], self.rank()), shifts.at(i));
  return {self};
}

// tril keeps col - row <= diagonal, triu keeps col - row >= diagonal, over the last two dims.
template <bool lower>
std::vector<Value> TriangleLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const int64_t rank = self.rank();
  TensorType positions{DType::kS64, self.shape()};
  Value offset = Sub(Iota(positions, rank - 1), Iota(positions, rank - 2));
  // A runtime parameter: a loop over diagonals reuses one program.
  Value diagonal = ctx.ScalarParameter(ctx.scalar(1), DType::kS64);
  Value keep = Compare(offset, diagonal, lower ? "LE" : "GE");
  return {Select(keep, self, ConstantLike(0, self))};
}

// Checks the CPU kernels make and PyTorch's meta functions lack (IndexError: std::out_of_range).
void CheckIndexSelect(const Value& index) {
  if (index.rank() > 1) throw std::out_of_range("index_select(): Index is supposed to be a vector");
  if (index.dtype() != DType::kS32 && index.dtype() != DType::kS64)
    throw std::invalid_argument("index_select(): Expected dtype int32 or int64 for index");
}

std::vector<Value> IndexSelectLowering(LoweringContext& ctx) {
  CheckIndexSelect(ctx.tensor(2));
  Value self = AtLeast1D(ctx.tensor(0));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  auto select = [&](const Value& value, const ir::Shape& shape) {
    return Reshape(Gather(value, SelectDim(ctx.tensor(2), dim)), shape);
  };
  // Selecting along another dim than a grown one (beam search reordering its KV cache by beam)
  // keeps the growing form: the same selection of the padded array, so the program depends on
  // the bucket and the next append stays padded.
  if (GrowingValue grown = ctx.growing(0); grown && grown.dim != dim) {
    ir::Shape padded_shape = grown.padded.shape();
    padded_shape[dim] = ctx.output().shape[dim];
    grown.padded = select(grown.padded, padded_shape);
    ctx.growing_results = {grown};
  }
  return {select(self, ctx.output().shape)};
}

std::vector<Value> GatherLowering(LoweringContext& ctx) {
  Value self = AtLeast1D(ctx.tensor(0));
  Value index = AtLeast1D(ctx.tensor(2));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  return {Reshape(Gather(self, AlongDim(self, index, dim)), ctx.output().shape)};
}

std::vector<Value> TakeLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const int64_t n = ir::NumElements(self.shape());
  Value index = WrapNegative(ToIndex(ctx.tensor(1)), n);
  IndexedAccess access{StackPoints({index}), {0}, 0};
  return {Gather(Reshape(self, {n}), access)};
}

bool IsMask(const Value& index) {
  return index && (index.dtype() == DType::kBool || index.dtype() == DType::kU8);
}

// Advanced indexing x[i0, :, i2]: the defined index tensors broadcast together; their dims replace
// the indexed axes where those are adjacent, and go first otherwise (NumPy's rule).
IndexedAccess AdvancedIndexAccess(const Value& self, const std::vector<Value>& indices) {
  std::vector<int64_t> axes;
  std::vector<Value> defined;
  Shape batch;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    if (IsMask(indices[i]))
      throw UnsupportedError("boolean mask indices (their result shape depends on the data)");
    axes.push_back(static_cast<int64_t>(i));
    defined.push_back(WrapNegative(ToIndex(indices[i]), self.shape()[i]));
    batch = BroadcastShapes(batch, indices[i].shape());
  }
  for (Value& index : defined) index = BroadcastTo(index, batch);
  bool adjacent = true;
  for (size_t j = 1; j < axes.size(); ++j) adjacent &= axes[j] == axes[j - 1] + 1;
  return IndexedAccess{StackPoints(defined), axes, adjacent ? axes.at(0) : 0};
}

// x[..., positions] with `positions` grown step by step (a decoding step's key positions,
// ops/growing.h) in growing form: the same gather with the padded positions, its padding zeros.
// A grown x along the indexed dim is read padded too; negative positions then wrap by its runtime
// length, as the plain gather wraps them by its size.
void AddGrowingIndexResult(LoweringContext& ctx) {
  std::vector<Value> indices = ctx.arg(1).tensors;
  int64_t axis = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!ctx.growing(1, i)) continue;
    if (axis >= 0) return;  // two grown indices
    axis = static_cast<int64_t>(i);
  }
  if (axis < 0) return;
  const GrowingValue grown = ctx.growing(1, axis);
  Value self = ctx.tensor(0);
  Value index = ToIndex(grown.padded);
  if (const GrowingValue grown_self = ctx.growing(0)) {
    if (grown_self.dim != axis) return;
    self = grown_self.padded;
    const Value length =
        BroadcastTo(Convert(grown_self.length_parameter, index.dtype()), index.shape());
    index = Select(Compare(index, ConstantLike(0, index), "LT"), Add(index, length), index);
  }
  // Where the grown dim lands in the result: in the indices' broadcast shape, placed where the
  // indexed dims were when they are adjacent (as AdvancedIndexAccess places it).
  Shape batch;
  std::vector<int64_t> axes;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    axes.push_back(static_cast<int64_t>(i));
    batch = BroadcastShapes(batch, indices[i].shape());
  }
  const int64_t at = grown.dim + static_cast<int64_t>(batch.size()) - grown.padded.rank();
  for (const Value& other : indices) {
    if (!other || other.node == indices[axis].node) continue;
    const int64_t d = at - (static_cast<int64_t>(batch.size()) - other.rank());
    if (d >= 0 && other.shape()[d] != 1) return;  // a plain index spans the grown dim
  }
  bool adjacent = true;
  for (size_t j = 1; j < axes.size(); ++j) adjacent &= axes[j] == axes[j - 1] + 1;
  const int64_t dim = at + (adjacent ? axes.at(0) : 0);
  Shape padded_shape = ctx.output().shape;
  if (dim >= static_cast<int64_t>(padded_shape.size()) || padded_shape[dim] != grown.length) return;
  padded_shape[dim] = grown.bucket();
  indices[axis] = index;
  const Value result = Gather(self, AdvancedIndexAccess(self, indices));
  if (result.shape() != padded_shape) return;
  ctx.growing_results = {PaddedResult(result, dim, grown.length_parameter, grown.length)};
}

std::vector<Value> IndexLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  Value result = Gather(self, AdvancedIndexAccess(self, ctx.arg(1).tensors));
  AddGrowingIndexResult(ctx);
  return {result};
}

// Inclusive prefix sum of a 1-D value, in log2(n) shifted additions.
Value PrefixSum(Value x) {
  const int64_t n = x.shape()[0];
  const Value zero = ConstantLike(0, Reshape(SliceAxis(x, 0, 0, 1), {}));
  for (int64_t shift = 1; shift < n; shift *= 2)
    x = Add(x, Pad(SliceAxis(x, 0, 0, n - shift), zero, {shift}, {0}, {0}));
  return x;
}

// x[mask] = values, x[:, mask] = values (a mask after leading full slices) without the data-
// dependent count: the k-th selected element takes values[k], k from a prefix sum of the mask.
Value MaskedPut(const Value& self, const std::vector<Value>& indices, const Value& values,
                bool accumulate) {
  int64_t first = 0;
  while (!indices.at(first)) ++first;
  const Value mask = Convert(indices[first], DType::kBool);
  for (size_t i = first + 1; i < indices.size(); ++i) {
    if (indices[i]) throw UnsupportedError("a boolean mask combined with other indices");
  }
  const int64_t mask_rank = mask.rank();
  // As the CPU's index expansion: each mask dim must match the dim of self it covers.
  for (int64_t j = 0; j < mask_rank; ++j) {
    const int64_t covered = first + j;
    if (covered >= self.rank() || mask.shape()[j] != self.shape()[covered]) {
      throw std::out_of_range("The shape of the mask " + ir::I64List(mask.shape()) + " at index " +
                              std::to_string(j) +
                              " does not match the shape of the indexed tensor " +
                              ir::I64List(self.shape()) + " at index " + std::to_string(covered));
    }
  }
  // The indexed value's shape is self's with the mask's dims replaced by one dim of the count.
  Shape leading(self.shape().begin(), self.shape().begin() + first);
  Shape trailing(self.shape().begin() + first + mask_rank, self.shape().end());
  const int64_t rank = first + 1 + static_cast<int64_t>(trailing.size());
  Shape padded(rank - values.rank(), 1);
  padded.insert(padded.end(), values.shape().begin(), values.shape().end());
  Shape selected_shape = leading;
  selected_shape.push_back(padded[first]);
  selected_shape.insert(selected_shape.end(), trailing.begin(), trailing.end());
  const Value selected =
      BroadcastTo(Reshape(Convert(values, self.dtype()), padded), selected_shape);
  const int64_t count = ir::NumElements(mask.shape());
  Value rank_in_selection =
      Sub(PrefixSum(Convert(Reshape(mask, {count}), DType::kS64)), Constant(1, DType::kS64));
  rank_in_selection = Reshape(Max(rank_in_selection, Constant(0, DType::kS64)), mask.shape());
  IndexedAccess access{StackPoints({rank_in_selection}), {first}, first};
  Value update = Gather(selected, access);  // self's shape
  if (accumulate) update = BinaryTyped(Combiner("sum", self.dtype()), self, update, self.dtype());
  // The mask's dims are self's dims first .. first + mask_rank - 1.
  std::vector<int64_t> mask_dims = Range(first, first + mask_rank);
  return Select(BroadcastInDim(mask, self.shape(), mask_dims), update, self);
}

// masked_scatter_(self, mask, source): the k-th true element of the broadcast mask, in row-major
// order, takes source's k-th element, k again from a prefix sum, so nothing waits on the data. A
// source shorter than the mask's count is read clamped (the CPU's check would need a host sync).
std::vector<Value> MaskedScatterLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const int64_t count = ir::NumElements(self.shape());
  const int64_t available = ir::NumElements(ctx.tensor(2).shape());
  if (count == 0 || available == 0) return {self};
  const Value mask = BroadcastTo(Convert(ctx.tensor(1), DType::kBool), self.shape());
  const Value source = Reshape(Convert(ctx.tensor(2), self.dtype()), {available});
  Value position =
      Sub(PrefixSum(Convert(Reshape(mask, {count}), DType::kS64)), Constant(1, DType::kS64));
  position = Min(Max(position, Constant(0, DType::kS64)), Constant(available - 1, DType::kS64));
  IndexedAccess access{StackPoints({position}), {0}, 0};
  return {Select(mask, Reshape(Gather(source, access), self.shape()), self)};
}

// Whether a value of `shape` broadcasts to `target` (without changing `target`).
bool BroadcastsTo(const Shape& shape, const Shape& target) {
  if (shape.size() > target.size()) return false;
  const size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && shape[d] != target[lead + d]) return false;
  }
  return true;
}

// _index_put_impl_(self, indices, values, accumulate, unsafe).
std::vector<Value> IndexPutLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const std::vector<Value>& indices = ctx.arg(1).tensors;
  const bool accumulate = ctx.bool_arg(3);
  // As the CPU's index checks (x[i] = v reaches here directly, past ATen's composite index).
  for (const Value& index : indices) {
    const DType t = index ? index.dtype() : DType::kS64;
    if (t != DType::kS64 && t != DType::kS32 && t != DType::kU8 && t != DType::kBool) {
      throw std::out_of_range("tensors used as indices must be long, int, byte or bool tensors");
    }
  }
  if (ctx.tensor(2).dtype() != self.dtype()) {
    throw std::invalid_argument(
        std::string("Index put requires the source and destination dtypes match, got ") +
        ScalarTypeName(self.dtype()) + " for the destination and " +
        ScalarTypeName(ctx.tensor(2).dtype()) + " for the source.");
  }
  if (std::any_of(indices.begin(), indices.end(), IsMask))
    return {MaskedPut(self, indices, ctx.tensor(2), accumulate)};
  const std::string op = accumulate ? Combiner("sum", self.dtype()) : "";
  const IndexedAccess access = AdvancedIndexAccess(self, indices);
  const Shape result = access.ResultShape(self);
  if (!BroadcastsTo(ctx.tensor(2).shape(), result)) {
    throw std::invalid_argument(
        "shape mismatch: value tensor of shape " + ir::I64List(ctx.tensor(2).shape()) +
        " cannot be broadcast to indexing result of shape " + ir::I64List(result));
  }
  return {Scatter(self, access, ctx.tensor(2), op)};
}

// put_(self, index, source, accumulate): index_put on the flattened tensor.
std::vector<Value> PutLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  if (ctx.tensor(1).dtype() != DType::kS64) {
    throw std::invalid_argument(std::string("put_(): Expected a long tensor for index, but got ") +
                                ScalarTypeName(ctx.tensor(1).dtype()));
  }
  if (ctx.tensor(2).dtype() != self.dtype()) {
    throw std::invalid_argument(
        std::string("put_(): self and source expected to have the same dtype, but got "
                    "self.dtype = ") +
        ScalarTypeName(self.dtype()) +
        " and source.dtype = " + ScalarTypeName(ctx.tensor(2).dtype()));
  }
  const int64_t n = ir::NumElements(self.shape());
  Value index = WrapNegative(ToIndex(ctx.tensor(1)), n);
  IndexedAccess access{StackPoints({Reshape(index, {ir::NumElements(index.shape())})}), {0}, 0};
  Value source = Reshape(ctx.tensor(2), {ir::NumElements(index.shape())});
  const std::string op = ctx.bool_arg(3) ? Combiner("sum", self.dtype()) : "";
  return {Reshape(Scatter(Reshape(self, {n}), access, source, op), self.shape())};
}

// index_add(self, dim, index, source, alpha), index_copy(self, dim, index, source) and
// index_fill(self, dim, index, value): updates to whole slices along `dim`.
std::vector<Value> IndexAddLowering(LoweringContext& ctx) {
  Value self = AtLeast1D(ctx.tensor(0));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  IndexedAccess access = SelectDim(ctx.tensor(2), dim);
  Value source = Reshape(ctx.tensor(3), access.ResultShape(self));
  if (ctx.has(4) && !ctx.scalar(4).IsOne())
    source = Mul(Convert(source, self.dtype()), ctx.ScalarParameter(ctx.scalar(4), self.dtype()));
  return {
      Reshape(Scatter(self, access, source, Combiner("sum", self.dtype())), ctx.output().shape)};
}

std::vector<Value> IndexCopyLowering(LoweringContext& ctx) {
  Value self = AtLeast1D(ctx.tensor(0));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  IndexedAccess access = SelectDim(ctx.tensor(2), dim);
  Value source = Reshape(ctx.tensor(3), access.ResultShape(self));
  return {Reshape(Scatter(self, access, source, ""), ctx.output().shape)};
}

std::vector<Value> IndexFillLowering(LoweringContext& ctx) {
  if (ctx.tensor(2).dtype() != DType::kS64)
    throw std::out_of_range("index_fill_(): Expected dtype int64 for index.");
  Value self = AtLeast1D(ctx.tensor(0));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  // Its negative indices count from the end, as on the CPU (index_select's and index_add's do not).
  IndexedAccess access = SelectDim(WrapNegative(ctx.tensor(2), self.shape()[dim]), dim);
  return {Reshape(Scatter(self, access, ctx.value(3, self.dtype()), ""), ctx.output().shape)};
}

// The updates a scatter along one dim takes: the index-shaped corner of a src tensor, or a
// scalar value.
Value ScatterSource(const LoweringContext& ctx, size_t i, const Value& index, DType dtype) {
  if (!ctx.is_tensor(i)) return ctx.value(i, dtype);
  Value src = AtLeast1D(ctx.tensor(i));
  return Convert(Slice(src, std::vector<int64_t>(src.rank(), 0), index.shape(),
                       std::vector<int64_t>(src.rank(), 1)),
                 dtype);
}

// scatter(self, dim, index, src|value[, reduce]) and scatter_add(self, dim, index, src).
std::vector<Value> ScatterLowering(LoweringContext& ctx) {
  Value self = AtLeast1D(ctx.tensor(0));
  Value index = AtLeast1D(ctx.tensor(2));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  std::string op;
  if (ctx.name == "scatter_add") op = Combiner("sum", self.dtype());
  if (ctx.has(4)) op = Combiner(ctx.string_arg(4), self.dtype());
  Value updates = ScatterSource(ctx, 3, index, self.dtype());
  return {Reshape(Scatter(self, AlongDim(self, index, dim), updates, op), ctx.output().shape)};
}

// scatter_reduce(self, dim, index, src, reduce, include_self). Without include_self, the
// scattered positions start from the reduction's identity; "mean" divides by the number of
// values reduced (PyTorch floors it for integers and leaves untouched positions as they were).
std::vector<Value> ScatterReduceLowering(LoweringContext& ctx) {
  Value self = AtLeast1D(ctx.tensor(0));
  Value index = AtLeast1D(ctx.tensor(2));
  const int64_t dim = NormalizeDim(ctx.int_arg(1), self.rank());
  const std::string& reduce = ctx.string_arg(4);
  const bool include_self = ctx.bool_arg(5, true);
  const DType dtype = self.dtype();
  const IndexedAccess access = AlongDim(self, index, dim);
  Value src = ScatterSource(ctx, 3, index, dtype);
  Value base = include_self ? self : Scatter(self, access, Identity(reduce, dtype), "");
  Value result = Scatter(base, access, src, Combiner(reduce, dtype));
  if (reduce == "mean") {
    if (dtype == DType::kBool) throw UnsupportedError("reduce 'mean' for bool");
    Value counts = Scatter(ConstantLike(include_self ? 1 : 0, self), access,
                           ir::IntegerConstant(1, dtype), Combiner("sum", dtype));
    Value none = Compare(counts, ConstantLike(0, counts), "EQ");
    counts = Select(none, ConstantLike(1, counts), counts);
    result = ir::IsFloating(dtype) ? Div(result, counts) : FloorDivide(result, counts);
  }
  return {Reshape(result, ctx.output().shape)};
}

LoweringRegistrar registrar({
    {"cat", CatLowering},
    {"flip", FlipLowering},
    {"roll", RollLowering},
    {"tril", TriangleLowering<true>},
    {"triu", TriangleLowering<false>},
    {"index_select", IndexSelectLowering},
    {"gather", GatherLowering},
    {"take", TakeLowering},
    {"index", IndexLowering},
    {"_index_put_impl", IndexPutLowering},
    {"masked_scatter", MaskedScatterLowering},
    {"put", PutLowering},
    {"index_add", IndexAddLowering},
    {"index_copy", IndexCopyLowering},
    {"index_fill", IndexFillLowering},
    {"scatter", ScatterLowering},
    {"scatter_add", ScatterLowering},
    {"scatter_reduce", ScatterReduceLowering},
});

}  // namespace

}  // namespace torch_tpu::ops
