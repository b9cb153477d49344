// The precision mode (ops/precision.h) applied to any matmul-like product: one function that,
// given how to record a single product op, records the passes the mode asks for. Shared by the
// matmul (linalg.cc) and convolution (conv.cc) lowerings.
#pragma once

#include <stdexcept>

#include "ops/builder.h"
#include "ops/precision.h"

namespace torch_tpu::ops {

// f32 x rounded to bf16's precision (to nearest, ties to even), still f32, computed on its bits.
// Not Convert(Convert(x, bf16), f32): XLA's GPU compiler drops such a pair of converts (excess
// precision is allowed by default), which made lo zero and HIGH the same as DEFAULT there.
// Finite x only; infinities and NaN are handled by the caller.
inline Value RoundedToBF16Precision(const Value& x) {
  const TensorType bits_type{DType::kU32, x.shape()};
  Value bits = ir::MakeOp("stablehlo.bitcast_convert", {x}, bits_type);
  Value lowest_kept_bit = And(Binary("stablehlo.shift_right_logical", bits, ConstantLike(16, bits)),
                              ConstantLike(1, bits));
  Value rounded = And(Add(bits, Add(lowest_kept_bit, ConstantLike(0x7FFF, bits))),
                      ConstantLike(0xFFFF0000u, bits));
  return ir::MakeOp("stablehlo.bitcast_convert", {rounded}, TensorType{DType::kF32, x.shape()});
}

// An f32 value as hi + lo, both bf16: hi is x rounded, lo the rounding residual. The cross terms
// use `hi_finite`, with infinities and NaN zeroed (lo is zero there), so that only hi * hi carries
// them: inf * 0 in a cross term would turn a finite-times-inf product into NaN.
struct SplitBF16Parts {
  Value hi, lo, hi_finite;
  explicit SplitBF16Parts(const Value& x) {
    hi = Convert(x, DType::kBF16);
    Value finite = ir::MakeOp("stablehlo.is_finite", {hi}, TensorType{DType::kBool, hi.shape()});
    Value zero = ConstantLike(0, hi);
    lo = Select(finite, Convert(Sub(x, RoundedToBF16Precision(x)), DType::kBF16), zero);
    hi_finite = Select(finite, hi, zero);
  }
};

// `product(lhs, rhs, result_dtype, highest)` records one product op of lhs and rhs accumulating
// in result_dtype (`highest` asks for full-precision arithmetic). Returns the product in its
// accumulation dtype: f32 for floating types up to f32, f64 for f64, integers their own type.
template <typename ProductOp>
Value PrecisionProduct(const Value& lhs, const Value& rhs, ProductOp&& product) {
  const DType dtype = lhs.dtype();
  if (dtype == DType::kBool) throw UnsupportedError("products of bool tensors");
  if (ir::IsIntegral(dtype)) return product(lhs, rhs, dtype, false);  // wrapping, as the CPU
  if (dtype == DType::kF64) return product(lhs, rhs, dtype, true);
  if (dtype != DType::kF32) return product(lhs, rhs, DType::kF32, false);  // bf16, f16
  switch (MatmulPrecision()) {
    case Precision::kHighest:
      return product(lhs, rhs, DType::kF32, true);
    case Precision::kDefault:
      return product(Convert(lhs, DType::kBF16), Convert(rhs, DType::kBF16), DType::kF32, false);
    case Precision::kHigh: {
      const SplitBF16Parts l(lhs), r(rhs);
      // The small cross terms first, so their sum is not lost against hi * hi.
      Value cross = Add(product(l.hi_finite, r.lo, DType::kF32, false),
                        product(l.lo, r.hi_finite, DType::kF32, false));
      return Add(cross, product(l.hi, r.hi, DType::kF32, false));
    }
  }
  throw std::logic_error("unknown matmul precision");
}

}  // namespace torch_tpu::ops
