// The FFT family: PyTorch's fft.* functions, stft and istft all reach three ATen ops, lowered
// here to stablehlo.fft one dimension at a time (moved last, transformed, moved back).
// stablehlo.fft's inverse transforms divide by n; PyTorch's ops are unnormalized and scale by
// `normalization` (0: none, 1: 1/sqrt(n), 2: 1/n, n the signal size over the transformed dims).
#include <cmath>
#include <string>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

std::vector<int64_t> LastFirstPermutation(int64_t rank, int64_t dim) {
  std::vector<int64_t> permutation;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != dim) permutation.push_back(i);
  }
  permutation.push_back(dim);
  return permutation;
}

std::vector<int64_t> Inverse(const std::vector<int64_t>& permutation) {
  std::vector<int64_t> inverse(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i) inverse[permutation[i]] = static_cast<int64_t>(i);
  return inverse;
}

// One stablehlo.fft of `type` along `dim`; `length` is the signal length (IRFFT's output size).
Value FftAlong(const Value& x, int64_t dim, const std::string& type, int64_t length,
               DType result_dtype, int64_t result_size) {
  const std::vector<int64_t> permutation = LastFirstPermutation(x.rank(), dim);
  Value moved = Transpose(x, permutation);
  Shape shape = moved.shape();
  shape.back() = result_size;
  Value transformed = ir::MakeOp("stablehlo.fft", {moved}, TensorType{result_dtype, shape},
                                 "fft_type = #stablehlo<fft_type " + type +
                                     ">, fft_length = array<i64: " + std::to_string(length) + ">");
  return Transpose(transformed, Inverse(permutation));
}

// An unnormalized complex transform along one dim (the inverse undoes stablehlo's 1/n).
Value ComplexAlong(const Value& z, int64_t dim, bool forward) {
  const int64_t n = z.shape()[dim];
  if (n == 0) return z;
  Value result = FftAlong(z, dim, forward ? "FFT" : "IFFT", n, DType::kC64, n);
  return forward ? result : Mul(result, Constant(static_cast<double>(n), DType::kC64));
}

Value Normalize(const Value& z, int64_t mode, int64_t signal_size) {
  if (mode == 0 || signal_size == 0) return z;
  const double n = static_cast<double>(signal_size);
  return Mul(z, ConstantLike(mode == 1 ? 1 / std::sqrt(n) : 1 / n, z));
}

int64_t SignalSize(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

// _fft_c2c(self, dim, normalization, forward)
std::vector<Value> FftC2CLowering(LoweringContext& ctx) {
  Value z = Convert(ctx.tensor(0), DType::kC64);
  const std::vector<int64_t>& dims = ctx.int_list(1);
  for (int64_t d : dims) z = ComplexAlong(z, d, ctx.bool_arg(3));
  return {Normalize(z, ctx.int_arg(2), SignalSize(ctx.tensor(0).shape(), dims))};
}

// _fft_r2c(self, dim, normalization, onesided): the last listed dim is real-to-complex (halved
// when onesided), the others complex.
std::vector<Value> FftR2CLowering(LoweringContext& ctx) {
  const Value x = Convert(ctx.tensor(0), DType::kF32);
  const std::vector<int64_t>& dims = ctx.int_list(1);
  const int64_t last = dims.back();
  const int64_t n = x.shape()[last];
  Value z;
  if (ctx.bool_arg(3)) {
    z = n == 0 ? Constant(0, DType::kC64, ctx.output().shape)
               : FftAlong(x, last, "RFFT", n, DType::kC64, n / 2 + 1);
  } else {
    z = ComplexAlong(Convert(x, DType::kC64), last, true);
  }
  for (size_t i = 0; i + 1 < dims.size(); ++i) z = ComplexAlong(z, dims[i], true);
  return {Normalize(z, ctx.int_arg(2), SignalSize(x.shape(), dims))};
}

// _fft_c2r(self, dim, normalization, last_dim_size): complex inverse transforms over all but the
// last listed dim, then a complex-to-real one producing last_dim_size values (the input holds
// last_dim_size / 2 + 1 of a Hermitian signal).
std::vector<Value> FftC2RLowering(LoweringContext& ctx) {
  Value z = Convert(ctx.tensor(0), DType::kC64);
  const std::vector<int64_t>& dims = ctx.int_list(1);
  const int64_t last = dims.back();
  const int64_t length = ctx.int_arg(3);
  for (size_t i = 0; i + 1 < dims.size(); ++i) z = ComplexAlong(z, dims[i], false);
  // stablehlo's IRFFT takes exactly length / 2 + 1 inputs: extra ones are dropped, missing ones
  // are zeros (what PyTorch's resize before the op gives).
  const int64_t half = length / 2 + 1, have = z.shape()[last];
  if (have > half) z = SliceAxis(z, last, 0, half);
  if (have < half) {
    std::vector<int64_t> low(z.rank(), 0), high(z.rank(), 0), interior(z.rank(), 0);
    high[last] = half - have;
    z = Pad(z, Constant(0, DType::kC64), low, high, interior);
  }
  Value x = FftAlong(z, last, "IRFFT", length, DType::kF32, length);
  x = Mul(x, Constant(static_cast<double>(length), DType::kF32));
  return {Convert(Normalize(x, ctx.int_arg(2), SignalSize(ctx.output().shape, dims)),
                  ctx.output().dtype)};
}

LoweringRegistrar registrar({
    {"_fft_c2c", FftC2CLowering},
    {"_fft_r2c", FftR2CLowering},
    {"_fft_c2r", FftC2RLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
