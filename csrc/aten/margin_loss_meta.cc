// Meta kernels for multi_margin_loss_backward and multilabel_margin_loss_backward, which PyTorch
// gives none (their forwards have Python ones): the fallback needs them for the output's shape
// before it calls the lowerings in csrc/ops/nn.cc. The gradient has self's shape and dtype; the
// checks are those the lowerings rely on, with the forward meta functions' messages.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <optional>
#include <utility>

namespace torch_tpu::aten {
namespace {

// self [C] or [N, C] (or 0-d): the sample and class counts.
std::pair<int64_t, int64_t> SamplesAndClasses(const at::Tensor& self) {
  TORCH_CHECK(self.dim() <= 2 && (self.dim() == 0 || self.size(-1) != 0),
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
              self.sizes());
  return {self.dim() == 2 ? self.size(0) : 1, self.dim() == 0 ? 1 : self.size(-1)};
}

// grad_output holds one value, or one per sample.
void CheckGradOutput(const at::Tensor& grad_output, int64_t samples) {
  TORCH_CHECK(grad_output.numel() == 1 || grad_output.numel() == samples,
              "grad_output should hold 1 or ", samples, " elements, but got shape ",
              grad_output.sizes());
}

void CheckMultiMargin(const at::Tensor& grad_output, const at::Tensor& self,
                      const at::Tensor& target, const at::Scalar& p,
                      const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(p.toDouble() == 1 || p.toDouble() == 2, "only p == 1 and p == 2 supported");
  const auto [samples, classes] = SamplesAndClasses(self);
  TORCH_CHECK(target.dim() <= 1 && target.numel() == samples, "inconsistent target size, expected ",
              samples, " but got ", target.sizes());
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->dim() <= 1 && weight->numel() == classes,
                "inconsistent weight size, expected ", classes, " but got ", weight->sizes());
  }
  CheckGradOutput(grad_output, samples);
}

void CheckMultilabelMargin(const at::Tensor& grad_output, const at::Tensor& self,
                           const at::Tensor& target, const at::Tensor& is_target) {
  const int64_t samples = SamplesAndClasses(self).first;
  TORCH_CHECK(target.sizes() == self.sizes(), "inconsistent target size: ", target.sizes(),
              " for input of size: ", self.sizes());
  TORCH_CHECK(is_target.sizes() == self.sizes(), "inconsistent is_target size: ", is_target.sizes(),
              " for input of size: ", self.sizes());
  CheckGradOutput(grad_output, samples);
}

at::Tensor MultiMarginLossBackwardMeta(const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& target, const at::Scalar& p,
                                       const at::Scalar& /*margin*/,
                                       const std::optional<at::Tensor>& weight,
                                       int64_t /*reduction*/) {
  CheckMultiMargin(grad_output, self, target, p, weight);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

at::Tensor& MultiMarginLossBackwardOutMeta(const at::Tensor& grad_output, const at::Tensor& self,
                                           const at::Tensor& target, const at::Scalar& p,
                                           const at::Scalar& /*margin*/,
                                           const std::optional<at::Tensor>& weight,
                                           int64_t /*reduction*/, at::Tensor& grad_input) {
  CheckMultiMargin(grad_output, self, target, p, weight);
  at::native::resize_output(grad_input, self.sizes());
  return grad_input;
}

at::Tensor MultilabelMarginLossBackwardMeta(const at::Tensor& grad_output, const at::Tensor& self,
                                            const at::Tensor& target, int64_t /*reduction*/,
                                            const at::Tensor& is_target) {
  CheckMultilabelMargin(grad_output, self, target, is_target);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

at::Tensor& MultilabelMarginLossBackwardOutMeta(const at::Tensor& grad_output,
                                                const at::Tensor& self, const at::Tensor& target,
                                                int64_t /*reduction*/, const at::Tensor& is_target,
                                                at::Tensor& grad_input) {
  CheckMultilabelMargin(grad_output, self, target, is_target);
  at::native::resize_output(grad_input, self.sizes());
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("multi_margin_loss_backward", TORCH_FN(MultiMarginLossBackwardMeta));
  m.impl("multi_margin_loss_backward.grad_input", TORCH_FN(MultiMarginLossBackwardOutMeta));
  m.impl("multilabel_margin_loss_backward", TORCH_FN(MultilabelMarginLossBackwardMeta));
  m.impl("multilabel_margin_loss_backward.grad_input",
         TORCH_FN(MultilabelMarginLossBackwardOutMeta));
}

}  // namespace torch_tpu::aten
