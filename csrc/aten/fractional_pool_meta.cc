// Meta kernels for fractional_max_pool3d_backward, which PyTorch gives none (the 2-D one has a
// structured meta function): the fallback needs one for the gradient's shape before it calls the
// lowering in csrc/ops/fractional_pool.cc. The gradient is self's shape and dtype, contiguous, as
// on the CPU; the checks are the CPU kernel's, with its messages.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace torch_tpu::aten {
namespace {

void CheckGradOutput(const at::Tensor& grad_output, const at::Tensor& self,
                     at::IntArrayRef output_size) {
  const int64_t time_dim = self.dim() == 5 ? 2 : 1;
  const char* names[] = {"time", "height", "width"};
  for (int64_t s = 0; s < 3; ++s) {
    TORCH_CHECK(output_size[s] == grad_output.size(time_dim + s),
                "fractional_max_pool3d_backward_out(): gradOutput ", names[s], " unexpected");
  }
}

at::Tensor FractionalMaxPool3dBackwardMeta(const at::Tensor& grad_output, const at::Tensor& self,
                                           at::IntArrayRef /*kernel_size*/,
                                           at::IntArrayRef output_size,
                                           const at::Tensor& /*indices*/) {
  CheckGradOutput(grad_output, self, output_size);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

at::Tensor& FractionalMaxPool3dBackwardOutMeta(
    const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef /*kernel_size*/,
    at::IntArrayRef output_size, const at::Tensor& /*indices*/, at::Tensor& grad_input) {
  CheckGradOutput(grad_output, self, output_size);
  at::native::resize_output(grad_input, self.sizes());
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("fractional_max_pool3d_backward", TORCH_FN(FractionalMaxPool3dBackwardMeta));
  m.impl("fractional_max_pool3d_backward.grad_input", TORCH_FN(FractionalMaxPool3dBackwardOutMeta));
}

}  // namespace torch_tpu::aten
