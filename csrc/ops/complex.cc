// complex64: the ops made for it (conj_physical, angle, complex, polar) and the list of lowerings
// checked with complex arguments. complex64 storages are PJRT C64 buffers; views of them as f32
// (view_as_real) reinterpret through (real, imag) pairs (ops/view.cc).
#include <string>
#include <unordered_set>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {

bool AcceptsComplex(const std::string& name) {
  // Lowerings whose StableHLO is valid for complex<f32> and matches PyTorch's complex semantics:
  // those tests/test_complex.py covers, and those every PyTorch OpInfo complex64 sample that
  // reaches them passes with (found with TORCH_TPU_COMPLEX_UNCHECKED=1 and tools/conformance.py
  // --dtypes complex64; lowerings any failing sample reached are left out).
  // clang-format off
  static const std::unordered_set<std::string> kChecked = {
      "_cholesky_solve_helper", "_conj_physical", "_fft_c2c", "_fft_c2r", "_fft_r2c",
      "_index_put_impl", "_linalg_det", "_linalg_eigh", "_linalg_eigvals", "_linalg_slogdet", "_linalg_solve_ex", "_linalg_svd", "abs", "acos",
      "acosh", "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "all", "angle", "any",
      "asin", "asinh", "atan", "atanh", "baddbmm", "bmm", "cat", "channel_shuffle",
      "cholesky_inverse", "complex", "conj_physical", "cos", "cosh", "count_nonzero", "cumprod",
      "cumsum", "div", "dot", "eq", "exp", "exp2", "expm1", "eye", "fill", "flip", "gather",
      "geqrf", "im2col", "index", "index_add", "index_copy", "index_fill", "index_select", "isnan", "lerp",
      "linalg_cholesky_ex", "linalg_cross", "linalg_eig", "linalg_eigvals", "linalg_householder_product", "linalg_inv_ex", "linalg_ldl_factor_ex", "linalg_ldl_solve", "linalg_lstsq", "linalg_lu", "linalg_lu_factor_ex",
      "linalg_lu_solve", "linalg_matrix_exp", "linalg_qr", "linalg_solve_triangular", "linalg_vector_norm",
      "linspace", "log", "log10", "log1p", "log2", "logaddexp", "logcumsumexp", "logical_and", "logical_not",
      "logical_or", "logical_xor", "logspace", "lu_unpack", "masked_fill", "masked_scatter", "mean",
      "mm", "mul", "ne", "neg", "nonzero_static", "norm", "normal", "ormqr", "polar", "pow", "prod", "put",
      "reciprocal", "reflection_pad1d", "renorm", "replication_pad1d", "replication_pad2d", "roll",
      "rsqrt", "rsub", "scatter", "scatter_add", "sgn", "sigmoid", "silu", "sin", "sinc", "sinh", "sqrt",
      "std", "std_mean", "sub", "sum", "take", "tan", "tanh", "trace", "triangular_solve", "tril",
      "triu", "unfold_backward", "uniform", "var", "var_mean", "vdot", "where", "zero"};
  // clang-format on
  return kChecked.count(name) > 0;
}

namespace {

Value Conjugate(const Value& z) {
  return ir::IsComplex(z.dtype()) ? MakeComplex(Real(z), Neg(Imag(z))) : z;
}

std::vector<Value> ConjPhysicalLowering(LoweringContext& ctx) {
  return {Convert(Conjugate(ctx.tensor(0)), ctx.output().dtype)};
}

// angle: atan2(imag, real) for complex; for reals, pi where negative, 0 elsewhere, NaN kept.
std::vector<Value> AngleLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  const DType out = ctx.output().dtype;
  if (ir::IsComplex(x.dtype())) {
    return {Convert(Binary("stablehlo.atan2", Imag(x), Real(x)), out)};
  }
  const Value real = Convert(x, out);
  Value angle = Select(Compare(real, ConstantLike(0, real), "LT"),
                       ConstantLike(3.14159265358979323846, real), ConstantLike(0, real));
  return {Select(IsNan(real), real, angle)};
}

std::vector<Value> ComplexLowering(LoweringContext& ctx) {
  return {MakeComplex(Convert(ctx.tensor(0), DType::kF32), Convert(ctx.tensor(1), DType::kF32))};
}

std::vector<Value> PolarLowering(LoweringContext& ctx) {
  const Value r = Convert(ctx.tensor(0), DType::kF32);
  const Value theta = Convert(ctx.tensor(1), DType::kF32);
  return {MakeComplex(Mul(r, Unary("stablehlo.cosine", theta)),
                      Mul(r, Unary("stablehlo.sine", theta)))};
}

LoweringRegistrar registrar({
    {"conj_physical", ConjPhysicalLowering},
    {"_conj_physical", ConjPhysicalLowering},
    {"angle", AngleLowering},
    {"complex", ComplexLowering},
    {"polar", PolarLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
