// Lowerings for the linalg op family: mm, bmm, dot and their fused-add forms. Every product goes
// through one helper that applies the precision mode (ops/precision.h, whose state lives here) to
// f32 operands.
#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "ops/builder.h"
#include "ops/precision.h"
#include "ops/products.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {

namespace {
// DEFAULT, the TPU's own default, on every platform (DESIGN.md "Platforms and numerics").
std::atomic<Precision> current_precision{Precision::kDefault};
}  // namespace

Precision MatmulPrecision() { return current_precision.load(std::memory_order_relaxed); }
void SetMatmulPrecision(Precision precision) {
  current_precision.store(precision, std::memory_order_relaxed);
}

namespace {

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};

const DotDims kMatrixMatrix{{}, {}, {1}, {0}};        // [n,k] x [k,m]
const DotDims kBatchMatrix{{0}, {0}, {2}, {1}};       // [b,n,k] x [b,k,m]
const DotDims kVector{{}, {}, {0}, {0}};              // [k] x [k]
const DotDims kBatchReduced{{}, {}, {0, 2}, {0, 1}};  // sum over b of [b,n,k] x [b,k,m]

Value Dot(const Value& lhs, const Value& rhs, const DotDims& dims, DType result, bool highest) {
  return DotGeneral(lhs, rhs, dims.lhs_batch, dims.rhs_batch, dims.lhs_contract, dims.rhs_contract,
                    result, highest);
}

// The product of `lhs` and `rhs` in the dtype it accumulates in, per the precision mode
// (ops/products.h).
Value Product(const Value& lhs, const Value& rhs, const DotDims& dims) {
  if (lhs.dtype() == DType::kBool) {
    throw UnsupportedError("matrix products are not defined for bool");
  }
  if (ir::IsComplex(lhs.dtype())) {
    // Four real products, each under the precision mode, as a TPU computes complex matmuls.
    const Value a = Real(lhs), b = Imag(lhs), c = Real(rhs), d = Imag(rhs);
    return MakeComplex(Sub(Product(a, c, dims), Product(b, d, dims)),
                       Add(Product(a, d, dims), Product(b, c, dims)));
  }
  return PrecisionProduct(lhs, rhs,
                          [&](const Value& l, const Value& r, DType result, bool highest) {
                            return Dot(l, r, dims, result, highest);
                          });
}

// PyTorch's meta function for mm does not check dtypes; its CPU kernel does.
void CheckSameDType(const Value& m1, const Value& m2) {
  if (m1.dtype() != m2.dtype()) {
    throw std::invalid_argument(
        std::string("expected m1 and m2 to have the same dtype, but got: ") +
        CppTypeName(m1.dtype()) + " != " + CppTypeName(m2.dtype()));
  }
}

// Lowerings of the plain products: (lhs, rhs) -> lhs x rhs.
template <const DotDims& dims>
std::vector<Value> ProductLowering(LoweringContext& ctx) {
  CheckSameDType(ctx.tensor(0), ctx.tensor(1));
  return {Convert(Product(ctx.tensor(0), ctx.tensor(1), dims), ctx.output().dtype)};
}

// vdot(self, other): sum of conj(self) * other; the conjugate is the identity on real dtypes.
std::vector<Value> VdotLowering(LoweringContext& ctx) {
  CheckSameDType(ctx.tensor(0), ctx.tensor(1));
  Value lhs = ctx.tensor(0);
  if (ir::IsComplex(lhs.dtype())) lhs = MakeComplex(Real(lhs), Neg(Imag(lhs)));
  return {Convert(Product(lhs, ctx.tensor(1), kVector), ctx.output().dtype)};
}

// The CPU's checks, which the meta function of addbmm lacks (the others' metas check first).
void CheckScaledAddDTypes(const Value& self, const Value& mat1, const Value& mat2) {
  auto check = [](const char* what, const Value& a, const Value& b) {
    if (a.dtype() != b.dtype()) {
      throw std::invalid_argument(std::string(what) + " must have the same dtype, but got " +
                                  ScalarTypeName(a.dtype()) + " and " + ScalarTypeName(b.dtype()));
    }
  };
  check("self and mat2", self, mat2);
  check("mat1 and mat2", mat1, mat2);
}

// Lowerings of the fused forms: (self, a, b, beta, alpha) -> beta * self + alpha * (a x b),
// computed in the accumulation dtype and rounded once. beta == 0 ignores self, NaN included, as
// PyTorch does; alpha and beta are runtime parameters otherwise.
template <const DotDims& dims>
std::vector<Value> ScaledAddLowering(LoweringContext& ctx) {
  CheckScaledAddDTypes(ctx.tensor(0), ctx.tensor(1), ctx.tensor(2));
  Value result = Product(ctx.tensor(1), ctx.tensor(2), dims);
  const DType accumulation = result.dtype();
  const Scalar beta = ctx.scalar(3), alpha = ctx.scalar(4);
  if (!alpha.IsOne()) result = Mul(result, ctx.ScalarParameter(alpha, accumulation));
  if (!beta.IsZero()) {
    Value self = Convert(ctx.tensor(0), accumulation);
    if (!beta.IsOne()) self = Mul(self, ctx.ScalarParameter(beta, accumulation));
    result = Add(self, result);
  }
  return {Convert(result, ctx.output().dtype)};
}

LoweringRegistrar registrar({
    {"mm", ProductLowering<kMatrixMatrix>},
    {"bmm", ProductLowering<kBatchMatrix>},
    {"dot", ProductLowering<kVector>},
    {"vdot", VdotLowering},
    {"addmm", ScaledAddLowering<kMatrixMatrix>},
    {"addmv", ScaledAddLowering<kMatrixMatrix>},
    {"baddbmm", ScaledAddLowering<kBatchMatrix>},
    {"addbmm", ScaledAddLowering<kBatchReduced>},
});

}  // namespace
}  // namespace torch_tpu::ops
