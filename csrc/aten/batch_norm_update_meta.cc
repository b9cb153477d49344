// A meta kernel for _batch_norm_with_update, whose PyTorch one (the Python decomposition) fails
// for weight=None (it passes None to _select_batch_norm_backend) and gives f32 statistics for
// bf16/f16 inputs where the CPU kernel keeps the input's dtype. The fallback needs the CPU's
// shapes and dtypes before it calls the lowering in csrc/ops/batch_norm_update.cc.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace torch_tpu::aten {
namespace {

// The CPU's rule: statistics are f32 when a bf16/f16 input meets f32 parameters, else the input's
// dtype.
at::ScalarType StatisticsType(const at::Tensor& input,
                              std::initializer_list<const at::Tensor*> parameters) {
  if (!at::isReducedFloatingType(input.scalar_type())) return input.scalar_type();
  for (const at::Tensor* p : parameters) {
    if (p->defined() && p->scalar_type() == at::kFloat) return at::kFloat;
  }
  return input.scalar_type();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> BatchNormWithUpdateMeta(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    double /*momentum*/, double /*eps*/) {
  const int64_t channels = input.size(1);  // IndexError for 1-D input, as on the CPU
  const at::Tensor none;
  const at::Tensor& w = weight.has_value() ? *weight : none;
  const at::Tensor& b = bias.has_value() ? *bias : none;
  const at::ScalarType stat = StatisticsType(input, {&w, &b, &running_mean, &running_var});
  const auto options = input.options().dtype(stat);
  return {at::empty_like(input, input.suggest_memory_format()), at::empty({channels}, options),
          at::empty({channels}, options), at::empty({0}, input.options().dtype(at::kByte))};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_batch_norm_with_update", TORCH_FN(BatchNormWithUpdateMeta));
}

}  // namespace torch_tpu::aten
