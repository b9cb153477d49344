// Meta kernel for _ctc_loss_backward (and tpu kernels for the tensor-length overloads, below),
// which PyTorch gives none: the fallback needs the gradient's shape before it calls the lowering in
// csrc/ops/ctc_loss.cc. The gradient has log_probs' shape and dtype, contiguous as on the CPU; the
// CPU's backward checks nothing the forward did not.
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

namespace torch_tpu::aten {
namespace {

at::Tensor CtcLossBackwardMeta(const at::Tensor& /*grad*/, const at::Tensor& log_probs,
                               const at::Tensor& /*targets*/, at::IntArrayRef /*input_lengths*/,
                               at::IntArrayRef /*target_lengths*/,
                               const at::Tensor& /*neg_log_likelihood*/,
                               const at::Tensor& /*log_alpha*/, int64_t /*blank*/,
                               bool /*zero_infinity*/) {
  return at::empty(log_probs.sizes(), log_probs.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) { m.impl("_ctc_loss_backward", TORCH_FN(CtcLossBackwardMeta)); }

}  // namespace torch_tpu::aten

// The overloads with length tensors: as the CPU kernels do, read the lengths to the host and call
// the int-list overloads (the lengths fix log_alpha's shape, so they are needed on the host).
namespace torch_tpu::aten {
namespace {

std::vector<int64_t> HostLengths(const at::Tensor& lengths) {
  TORCH_CHECK(at::isIntegralType(lengths.scalar_type(), /*includeBool=*/false),
              "input_lengths and target_lengths must be integral");
  const at::Tensor host = lengths.to(c10::Device(c10::kCPU), at::kLong).contiguous();
  return std::vector<int64_t>(host.const_data_ptr<int64_t>(),
                              host.const_data_ptr<int64_t>() + host.numel());
}

std::tuple<at::Tensor, at::Tensor> CtcLossTensorLengths(const at::Tensor& log_probs,
                                                        const at::Tensor& targets,
                                                        const at::Tensor& input_lengths,
                                                        const at::Tensor& target_lengths,
                                                        int64_t blank, bool zero_infinity) {
  return at::_ctc_loss(log_probs, targets, HostLengths(input_lengths), HostLengths(target_lengths),
                       blank, zero_infinity);
}

at::Tensor CtcLossBackwardTensorLengths(const at::Tensor& grad, const at::Tensor& log_probs,
                                        const at::Tensor& targets, const at::Tensor& input_lengths,
                                        const at::Tensor& target_lengths,
                                        const at::Tensor& neg_log_likelihood,
                                        const at::Tensor& log_alpha, int64_t blank,
                                        bool zero_infinity) {
  return at::_ctc_loss_backward(grad, log_probs, targets, HostLengths(input_lengths),
                                HostLengths(target_lengths), neg_log_likelihood, log_alpha, blank,
                                zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss.Tensor", TORCH_FN(CtcLossTensorLengths));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(CtcLossBackwardTensorLengths));
}

}  // namespace torch_tpu::aten
