// nonzero_static(self, size, fill_value): the coordinates of the first `size` nonzero elements in
// row-major order, as a [size, self.dim()] s64 tensor, rows past the count set to fill_value. The
// shape is fixed by `size`, so unlike nonzero it needs no host read: each nonzero element's row is
// the count of nonzero elements before it (a prefix sum), and it is scattered there.
#include <vector>

#include "ops/builder.h"
#include "ops/row_scatter.h"

namespace torch_tpu::ops {
namespace {

// Exclusive prefix sum of a 1-D s64 value.
Value CountBefore(const Value& flags) {
  Value inclusive =
      InclusiveScan({flags}, 0, {ir::IntegerConstant(0, DType::kS64)},
                    [](const std::vector<Value>& earlier, const std::vector<Value>& later) {
                      return std::vector<Value>{Add(earlier[0], later[0])};
                    })[0];
  return Sub(inclusive, flags);
}

std::vector<Value> NonzeroStaticLowering(LoweringContext& ctx) {
  const TensorType& out = ctx.output();
  Value self = ctx.tensor(0);
  const int64_t size = out.shape[0];
  const int64_t rank = out.shape[1];
  const int64_t n = ir::NumElements(self.shape());
  // fill_value is a runtime parameter: a new one does not recompile.
  Value fill = BroadcastTo(ctx.value(2, DType::kS64), {size + 1, rank});
  if (rank == 0 || n == 0 || size == 0) return {SliceAxis(fill, 0, 0, size)};
  Value nonzero = Compare(self, ConstantLike(0, self), "NE");
  nonzero = Reshape(nonzero, {n});
  Value flags = Convert(nonzero, DType::kS64);
  // Zero elements, and nonzero ones beyond `size`, go to a spare last row dropped at the end.
  Value row = CountBefore(flags);
  Value spare = Constant(static_cast<double>(size), DType::kS64, {n});
  row = Select(And(nonzero, Compare(row, spare, "LT")), row, spare);
  std::vector<Value> columns;
  const TensorType positions{DType::kS64, self.shape()};
  for (int64_t d = 0; d < rank; ++d) columns.push_back(Reshape(Iota(positions, d), {n, 1}));
  Value coordinates = Concatenate(columns, 1);
  return {SliceAxis(ScatterRows(fill, row, coordinates, RowReduce::kReplace), 0, 0, size)};
}

LoweringRegistrar registrar({
    {"nonzero_static", NonzeroStaticLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
