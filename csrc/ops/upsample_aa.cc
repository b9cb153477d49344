// Lowerings for antialiased resizing (F.interpolate(mode="bilinear" or "bicubic",
// antialias=True)): _upsample_bilinear2d_aa, _upsample_bicubic2d_aa and their backwards.
//
// The filter is separable and its weights depend only on the sizes, so each axis's weights are
// a host-computed [out, in] matrix (PyTorch's triangle or Keys cubic filter, a = -0.5, widened by
// the downscale factor, each row normalized to sum 1), computed in the CPU kernel's arithmetic.
// Resizing is then two contractions, and its backward the two transposed ones.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// area_pixel_compute_scale: input pixels per output pixel.
template <typename T>
T Scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  if (scale && *scale > 0) return static_cast<T>(1.0 / *scale);
  return static_cast<T>(in) / static_cast<T>(out);
}

// The two filters, by the number of input pixels each spans when not downscaling.
enum class Filter { kTriangle = 2, kCubic = 4 };

template <typename T>
T FilterWeight(Filter filter, T x) {
  x = x < 0 ? -x : x;
  if (filter == Filter::kTriangle) return x < 1 ? 1 - x : T(0);
  constexpr T a = -0.5;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return T(0);
}

// Row-major [out, in] weights, as the CPU kernel's _compute_indices_min_size_weights_aa forms
// them (truncating casts included).
template <typename T>
std::vector<double> AxisWeights(Filter filter, int64_t in, int64_t out, bool align_corners,
                                std::optional<double> scale_arg) {
  const T scale = Scale<T>(in, out, align_corners, scale_arg);
  const T half_size = static_cast<T>(static_cast<int>(filter)) / 2;
  const T support = scale >= 1 ? half_size * scale : half_size;
  const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const T invscale = scale >= 1 ? T(1) / scale : T(1);
  std::vector<double> weights(out * in, 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const T center = scale * (static_cast<T>(i) + T(0.5));
    const int64_t first = std::max<int64_t>(static_cast<int64_t>(center - support + T(0.5)), 0);
    int64_t size = std::min<int64_t>(static_cast<int64_t>(center + support + T(0.5)), in) - first;
    size = std::clamp<int64_t>(size, 0, max_size);
    std::vector<T> w(size);
    T total = 0;
    for (int64_t j = 0; j < size; ++j) {
      w[j] = FilterWeight<T>(filter, (static_cast<T>(j + first) - center + T(0.5)) * invscale);
      total += w[j];
    }
    for (int64_t j = 0; j < size; ++j) {
      weights[i * in + first + j] = static_cast<double>(total != 0 ? w[j] / total : w[j]);
    }
  }
  return weights;
}

Value Matrix(const std::vector<double>& values, int64_t rows, int64_t columns, DType dtype) {
  std::string text;
  char buffer[40];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buffer, sizeof(buffer), "%.17e", values[i]);  // exact for f32 and f64
    text += (i ? ", " : "") + std::string(buffer);
  }
  const TensorType flat{dtype, {rows * columns}};
  return Reshape(ir::MakeOp("stablehlo.constant", {}, flat,
                            "value = dense<[" + text + "]> : " + flat.ToMlir()),
                 {rows, columns});
}

// The [out, in] weights of one axis in the compute dtype t.
Value Weights(Filter filter, int64_t in, int64_t out, bool align_corners,
              std::optional<double> scale, DType t) {
  const std::vector<double> w = t == DType::kF64
                                    ? AxisWeights<double>(filter, in, out, align_corners, scale)
                                    : AxisWeights<float>(filter, in, out, align_corners, scale);
  return Matrix(w, out, in, t);
}

std::optional<double> OptionalDouble(const LoweringContext& ctx, size_t i) {
  if (!ctx.has(i)) return std::nullopt;
  return ctx.double_arg(i);
}

// x [N, C, A, B] contracted over A with weights' dim `weight_dim`, then over B: each contraction
// moves its axis last, so two give [N, C, A', B'].
Value ResizeBoth(const Value& x, const Value& rows, const Value& columns, int64_t weight_dim) {
  const DType t = x.dtype();
  const Value first = DotGeneral(x, rows, {}, {}, {2}, {weight_dim}, t, /*highest=*/true);
  return DotGeneral(first, columns, {}, {}, {2}, {weight_dim}, t, /*highest=*/true);
}

// _upsample_{bilinear,bicubic}2d_aa(self, output_size, align_corners, scales_h, scales_w).
template <Filter filter>
std::vector<Value> UpsampleAaLowering(LoweringContext& ctx) {
  const Value self = ctx.tensor(0);
  const DType t = OpMathType(self.dtype());
  const std::vector<int64_t>& out = ctx.int_list(1);
  const bool align_corners = ctx.bool_arg(2);
  const Value rows =
      Weights(filter, self.shape()[2], out.at(0), align_corners, OptionalDouble(ctx, 3), t);
  const Value columns =
      Weights(filter, self.shape()[3], out.at(1), align_corners, OptionalDouble(ctx, 4), t);
  return {Convert(ResizeBoth(Convert(self, t), rows, columns, 1), ctx.output().dtype)};
}

// _upsample_{bilinear,bicubic}2d_aa_backward(grad_output, output_size, input_size, align_corners,
// scales_h, scales_w): the transposed contractions.
template <Filter filter>
std::vector<Value> UpsampleAaBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0);
  const DType t = OpMathType(grad.dtype());
  const std::vector<int64_t>& out = ctx.int_list(1);
  const std::vector<int64_t>& in = ctx.int_list(2);
  const bool align_corners = ctx.bool_arg(3);
  const Value rows = Weights(filter, in.at(2), out.at(0), align_corners, OptionalDouble(ctx, 4), t);
  const Value columns =
      Weights(filter, in.at(3), out.at(1), align_corners, OptionalDouble(ctx, 5), t);
  return {Convert(ResizeBoth(Convert(grad, t), rows, columns, 0), ctx.output().dtype)};
}

LoweringRegistrar registrar({
    {"_upsample_bilinear2d_aa", UpsampleAaLowering<Filter::kTriangle>},
    {"_upsample_bilinear2d_aa_backward", UpsampleAaBackwardLowering<Filter::kTriangle>},
    {"_upsample_bicubic2d_aa", UpsampleAaLowering<Filter::kCubic>},
    {"_upsample_bicubic2d_aa_backward", UpsampleAaBackwardLowering<Filter::kCubic>},
});

}  // namespace
}  // namespace torch_tpu::ops
