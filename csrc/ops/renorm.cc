// renorm(self, p, dim, maxnorm): each slice along `dim` whose p-norm exceeds maxnorm is scaled
// to norm maxnorm. As on the CPU: the norm is taken in the op-math type (f32 for f16/bf16), the
// factor maxnorm / (norm + 1e-7) is rounded to the input's dtype before the multiply.
// Its backward (renorm_backward) is composite in PyTorch and needs no lowering of its own.
// embedding_renorm_ (nn.Embedding's max_norm) does the same to the rows its indices name.
#include <cmath>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// sum(|x|^p)^(1/p) over `dims`, with the exact forms for p = 1, 2 and inf. p picks the formula,
// so it is part of the program; maxnorm is a runtime parameter.
Value VectorNorm(const Value& x, const std::vector<int64_t>& dims, double p) {
  Value magnitude = Abs(x);
  if (std::isinf(p))
    return Reduce(magnitude, dims, "stablehlo.maximum", ir::ScalarConstant(0, magnitude.dtype()));
  if (p == 1) return SumOver(magnitude, dims);
  if (p == 2) return Sqrt(SumOver(Mul(magnitude, magnitude), dims));
  Value powered = Binary("stablehlo.power", magnitude, ConstantLike(p, magnitude));
  Value sum = SumOver(powered, dims);
  return Binary("stablehlo.power", sum, ConstantLike(1.0 / p, sum));
}

std::vector<Value> RenormLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const DType dtype = self.dtype();
  const int64_t dim = NormalizeDim(ctx.int_arg(2), self.rank());
  std::vector<int64_t> others;
  for (int64_t d = 0; d < self.rank(); ++d) {
    if (d != dim) others.push_back(d);
  }
  const DType math = OpMathType(dtype);
  Value norm = VectorNorm(Convert(self, math), others, ctx.double_arg(1));
  // The norm of a complex input is real, and so is maxnorm.
  Value maxnorm = BroadcastTo(ctx.value(3, norm.dtype()), norm.shape());
  Value scale = Div(maxnorm, Add(norm, ConstantLike(1e-7, norm)));
  Value factor = Select(Compare(norm, maxnorm, "GT"), scale, ConstantLike(1, norm));
  factor = BroadcastInDim(Convert(factor, dtype), self.shape(), {dim});
  return {Mul(self, factor)};
}

// embedding_renorm_(self [n, d], indices, max_norm, norm_type): each row of self that an index
// names (once, however often named) whose norm exceeds max_norm is scaled by
// max_norm / (norm + 1e-7). As the CPU's row loop: the norm is read back in self's dtype and the
// row multiplied in the op-math type. An index out of range names no row (the embedding that
// follows reports it).
std::vector<Value> EmbeddingRenormLowering(LoweringContext& ctx) {
  const Value self = ctx.tensor(0);
  const DType dtype = self.dtype(), math = OpMathType(dtype);
  const int64_t rows = self.shape()[0];
  const Value indices = Convert(ctx.tensor(1), DType::kS64);
  const int64_t count = ir::NumElements(indices.shape());
  const Value named =
      Compare(ScatterAdd1D(Constant(1, DType::kS32, {count}), Reshape(indices, {count}), rows),
              Constant(0, DType::kS32, {rows}), "GT");
  const Value wide = Convert(self, math);
  const Value norm = Convert(Convert(VectorNorm(wide, {1}, ctx.double_arg(3)), dtype), math);
  const Value max_norm = BroadcastTo(ctx.value(2, math), norm.shape());
  const Value scale = Div(max_norm, Add(norm, ConstantLike(1e-7, norm)));
  const Value factor =
      Select(And(named, Compare(norm, max_norm, "GT")), scale, ConstantLike(1, norm));
  return {Convert(Mul(wide, BroadcastInDim(factor, self.shape(), {0})), dtype)};
}

LoweringRegistrar registrar({
    {"renorm", RenormLowering},
    {"embedding_renorm", EmbeddingRenormLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
