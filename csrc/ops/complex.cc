// complex64: the ops made for it (conj_physical, angle, complex, polar) and the list of lowerings
// checked with complex arguments. complex64 storages are PJRT C64 buffers; views of them as f32
// (view_as_real) reinterpret through (real, imag) pairs (ops/view.cc).
#include <string>
#include <unordered_set>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {

bool AcceptsComplex(const std::string& name) {
  // Lowerings whose StableHLO is valid for complex<f32> and matches PyTorch's complex semantics.
  static const std::unordered_set<std::string> kChecked = {"add",
                                                           "sub",
                                                           "rsub",
                                                           "mul",
                                                           "div",
                                                           "neg",
                                                           "eq",
                                                           "ne",
                                                           "abs",
                                                           "sgn",
                                                           "exp",
                                                           "log",
                                                           "sqrt",
                                                           "sin",
                                                           "cos",
                                                           "tanh",
                                                           "reciprocal",
                                                           "fill",
                                                           "zero",
                                                           "clone",
                                                           "_to_copy",
                                                           "cat",
                                                           "where",
                                                           "sum",
                                                           "mean",
                                                           "conj_physical",
                                                           "_conj_physical",
                                                           "angle",
                                                           "complex",
                                                           "polar",
                                                           "_fft_c2c",
                                                           "_fft_r2c",
                                                           "_fft_c2r",
                                                           "constant_pad_nd",
                                                           "flip",
                                                           "roll",
                                                           "mm",
                                                           "bmm",
                                                           "dot",
                                                           "addmm",
                                                           "addmv",
                                                           "baddbmm",
                                                           "addbmm"};
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
