// Lowerings for sliding-window patches: im2col (F.unfold) and col2im (F.fold), each the other's
// backward. Both are static in their window, so they are kernel_h * kernel_w strided slices of
// the padded image (im2col) or the sum of as many interior-padded slabs (col2im): exact for every
// dtype, with no gather, scatter or convolution (whose arithmetic would follow the precision
// mode).
#include <algorithm>
#include <string>
#include <vector>

#include "ops/builder.h"
#include "ops/type_names.h"

namespace torch_tpu::ops {
namespace {

// The (kernel, dilation, padding, stride) of the window and the image and patch-grid sizes, each
// as (height, width).
struct PatchGeometry {
  std::vector<int64_t> kernel, dilation, padding, stride;
  std::vector<int64_t> image, grid;
  int64_t patches() const { return kernel[0] * kernel[1]; }
};

// The window arguments start at `first`; `image` is the spatial size of the (unpadded) image.
PatchGeometry ReadGeometry(const LoweringContext& ctx, size_t first,
                           const std::vector<int64_t>& image) {
  PatchGeometry g;
  g.kernel = ctx.int_list(first);
  g.dilation = ctx.int_list(first + 1);
  g.padding = ctx.int_list(first + 2);
  g.stride = ctx.int_list(first + 3);
  g.image = image;
  for (int s = 0; s < 2; ++s) {
    const int64_t span = g.dilation[s] * (g.kernel[s] - 1) + 1;
    g.grid.push_back((image[s] + 2 * g.padding[s] - span) / g.stride[s] + 1);
  }
  return g;
}

// The CPU kernels exist for floating types and bool only.
void CheckPatchDType(const std::string& kernel, DType dtype) {
  if (dtype != DType::kBool) CheckFloatingKernel(kernel, dtype);
}

// The end (exclusive) of the strided run of grid positions that kernel tap `tap` reads along
// spatial axis `s` of the padded image.
int64_t TapLimit(const PatchGeometry& g, int s, int64_t tap) {
  return tap * g.dilation[s] + (g.grid[s] - 1) * g.stride[s] + 1;
}

// im2col(self, kernel_size, dilation, padding, stride): [N,] C, H, W -> [N,] C * kh * kw, L with
// rows ordered (channel, kernel row, kernel column) and L the patch grid in row-major order.
std::vector<Value> Im2colLowering(LoweringContext& ctx) {
  const Value x = ctx.tensor(0);
  CheckPatchDType("im2col_out_cpu", x.dtype());
  const Shape& s = x.shape();
  const int64_t batch = x.rank() == 4 ? s[0] : 1;
  const int64_t channels = s[x.rank() - 3];
  const PatchGeometry g = ReadGeometry(ctx, 1, {s[x.rank() - 2], s[x.rank() - 1]});
  const int64_t grid_size = g.grid[0] * g.grid[1];
  Value image = Reshape(x, {batch, channels, g.image[0], g.image[1]});
  image = Pad(image, ir::ScalarConstant(0, x.dtype()), {0, 0, g.padding[0], g.padding[1]},
              {0, 0, g.padding[0], g.padding[1]}, {0, 0, 0, 0});
  std::vector<Value> taps;
  for (int64_t i = 0; i < g.kernel[0]; ++i) {
    for (int64_t j = 0; j < g.kernel[1]; ++j) {
      Value tap = Slice(image, {0, 0, i * g.dilation[0], j * g.dilation[1]},
                        {batch, channels, TapLimit(g, 0, i), TapLimit(g, 1, j)},
                        {1, 1, g.stride[0], g.stride[1]});
      taps.push_back(Reshape(tap, {batch, channels, 1, grid_size}));
    }
  }
  return {Reshape(Concatenate(taps, 2), ctx.output().shape)};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride): the transpose of im2col;
// every image position sums the columns of the patches covering it. Each kernel tap's slab of
// the grid is spread over the padded image by interior padding (the stride) and edge padding
// (the tap's offset). Half precision sums in f32, rounded once.
std::vector<Value> Col2imLowering(LoweringContext& ctx) {
  const Value columns = ctx.tensor(0);
  CheckPatchDType("col2im_out_cpu", columns.dtype());
  const TensorType& out = ctx.output();
  const int64_t batch = columns.rank() == 3 ? columns.shape()[0] : 1;
  const int64_t channels = out.shape[out.rank() - 3];
  const PatchGeometry g = ReadGeometry(ctx, 2, ctx.int_list(1));
  const DType t = columns.dtype() == DType::kBool ? DType::kBool : OpMathType(columns.dtype());
  const int64_t padded_h = g.image[0] + 2 * g.padding[0];
  const int64_t padded_w = g.image[1] + 2 * g.padding[1];
  Value slabs = Reshape(Convert(columns, t), {batch, channels, g.patches(), g.grid[0], g.grid[1]});
  const Value zero = ir::ScalarConstant(0, t);
  Value image;
  for (int64_t i = 0; i < g.kernel[0]; ++i) {
    for (int64_t j = 0; j < g.kernel[1]; ++j) {
      Value slab = Reshape(SliceAxis(slabs, 2, i * g.kernel[1] + j, i * g.kernel[1] + j + 1),
                           {batch, channels, g.grid[0], g.grid[1]});
      Value spread = Pad(slab, zero, {0, 0, i * g.dilation[0], j * g.dilation[1]},
                         {0, 0, padded_h - TapLimit(g, 0, i), padded_w - TapLimit(g, 1, j)},
                         {0, 0, g.stride[0] - 1, g.stride[1] - 1});
      // Bool columns combine with "or", as the CPU's `+=` on bool does.
      image = image ? (t == DType::kBool ? Or(image, spread) : Add(image, spread)) : spread;
    }
  }
  image =
      Slice(image, {0, 0, g.padding[0], g.padding[1]},
            {batch, channels, g.padding[0] + g.image[0], g.padding[1] + g.image[1]}, {1, 1, 1, 1});
  return {Reshape(Convert(image, out.dtype), out.shape)};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): Tensor.unfold's backward. grad_in has
// the input's shape with `dim` counting windows, plus a last dim of `size`; every element adds
// into input position window * step + offset along `dim` (windows overlap when step < size), one
// scatter-add over the flattened input. istft's overlap-add is this op.
std::vector<Value> UnfoldBackwardLowering(LoweringContext& ctx) {
  const Value grad = ctx.tensor(0);
  const TensorType& out = ctx.output();
  const int64_t rank = std::max<int64_t>(out.rank(), 1);
  int64_t dim = ctx.int_arg(2);
  if (dim < 0) dim += rank;
  const int64_t step = ctx.int_arg(4);
  const TensorType index{DType::kS64, grad.shape()};
  Value flat = Constant(0, DType::kS64, grad.shape());
  int64_t stride = 1;
  for (int64_t axis = rank - 1; axis >= 0; --axis) {
    Value coordinate = Iota(index, axis);
    if (axis == dim) {
      coordinate = Add(Mul(coordinate, Constant(static_cast<double>(step), DType::kS64)),
                       Iota(index, grad.rank() - 1));
    }
    flat = Add(flat, Mul(coordinate, Constant(static_cast<double>(stride), DType::kS64)));
    stride *= out.rank() == 0 ? 1 : out.shape[axis];
  }
  const Value sums = ScatterAdd1D(Convert(grad, OpMathType(grad.dtype())), flat, stride);
  return {Reshape(Convert(sums, out.dtype), out.shape)};
}

LoweringRegistrar registrar({
    {"unfold_backward", UnfoldBackwardLowering},
    {"im2col", Im2colLowering},
    {"col2im", Col2imLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
