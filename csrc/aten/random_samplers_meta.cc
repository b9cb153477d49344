// Meta kernels for binomial, _sample_dirichlet, _standard_gamma_grad and _dirichlet_grad, which
// PyTorch gives none: the fallback needs their shapes before it calls the lowerings in
// csrc/ops/random_samplers.cc. They build the CPU kernels' TensorIterator over the meta tensors,
// so the broadcasting, dtype and resize checks (and the resize warning) are the CPU's, after
// binomial's own dtype checks. The kernels' dtype dispatch is the lowerings'.
#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>

namespace torch_tpu::aten {
namespace {

// A result of `like`'s sizes and options, as the CPU kernels make it, then broadcast with the
// inputs (`like` is the first).
at::Tensor ElementwiseResult(const at::Tensor& like, const at::Tensor& second,
                             const std::optional<at::Tensor>& third = std::nullopt) {
  at::Tensor result = at::empty(like.sizes(), like.options());
  at::TensorIteratorConfig config;
  config.add_output(result).add_const_input(like).add_const_input(second);
  if (third) config.add_const_input(*third);
  config.build();
  return result;
}

at::Tensor BinomialMeta(const at::Tensor& count, const at::Tensor& prob,
                        std::optional<at::Generator> /*generator*/) {
  TORCH_CHECK_VALUE(
      at::isFloatingType(count.scalar_type()),
      "binomial only supports floating-point dtypes for count, got: ", count.scalar_type());
  TORCH_CHECK_VALUE(
      at::isFloatingType(prob.scalar_type()),
      "binomial only supports floating-point dtypes for prob, got: ", prob.scalar_type());
  return ElementwiseResult(count, prob);
}

at::Tensor SampleDirichletMeta(const at::Tensor& alpha,
                               std::optional<at::Generator> /*generator*/) {
  return at::empty(alpha.sizes(), alpha.options());
}

at::Tensor StandardGammaGradMeta(const at::Tensor& self, const at::Tensor& output) {
  return ElementwiseResult(self, output);
}

at::Tensor DirichletGradMeta(const at::Tensor& x, const at::Tensor& alpha,
                             const at::Tensor& total) {
  return ElementwiseResult(x, alpha, total);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("binomial", TORCH_FN(BinomialMeta));
  m.impl("_sample_dirichlet", TORCH_FN(SampleDirichletMeta));
  m.impl("_standard_gamma_grad", TORCH_FN(StandardGammaGradMeta));
  m.impl("_dirichlet_grad", TORCH_FN(DirichletGradMeta));
}

}  // namespace torch_tpu::aten
