// Which scaled_dot_product_attention tpu runs: PyTorch asks the device's _fused_sdp_choice stub
// (and, from meta and fake tensors, the _fused_sdp_choice op). OVERRIDEABLE sends attention to
// _scaled_dot_product_fused_attention_overrideable (src/torch_tpu/_attention.py), one op each
// way lowered in csrc/ops/attention.cc; dropout and grouped-query attention with fewer key/value
// heads take PyTorch's math path.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace torch_tpu::aten {
namespace {

bool IsFloating(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 ||
         t.scalar_type() == at::kHalf || t.scalar_type() == at::kDouble;
}

int64_t FusedSdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  (void)attn_mask, (void)is_causal, (void)scale, (void)enable_gqa;
  // 3-D and 4-D: the shapes the overrideable op's meta function (used when compiling) accepts.
  const bool fused =
      dropout_p == 0.0 && (query.dim() == 3 || query.dim() == 4) && IsFloating(query) &&
      key.scalar_type() == query.scalar_type() && value.scalar_type() == query.scalar_type() &&
      key.dim() == query.dim() && value.dim() == query.dim() &&
      query.sizes().slice(0, query.dim() - 2) == key.sizes().slice(0, key.dim() - 2) &&
      key.sizes().slice(0, key.dim() - 2) == value.sizes().slice(0, value.dim() - 2);
  return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_fused_sdp_choice", TORCH_FN(FusedSdpChoice)); }

}  // namespace torch_tpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::aten::FusedSdpChoice);
}  // namespace at::native
