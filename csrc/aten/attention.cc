// Which scaled_dot_product_attention tpu runs: PyTorch asks the device's _fused_sdp_choice stub
// (and, from meta and fake tensors, the _fused_sdp_choice op). OVERRIDEABLE sends attention to
// _scaled_dot_product_fused_attention_overrideable (src/torch_tpu/_attention.py), one op each
// way lowered in csrc/ops/attention.cc, grouped-query attention (enable_gqa) included; dropout
// takes PyTorch's math path.
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
  (void)attn_mask, (void)is_causal, (void)scale;
  // 3-D and 4-D: the shapes the overrideable op's meta function (used when compiling) accepts.
  const int64_t dim = query.dim();
  const bool same_heads = query.sizes().slice(0, dim - 2) == key.sizes().slice(0, dim - 2);
  // Grouped-query attention (4-D, query heads a multiple of key/value heads): the lowering
  // repeats each key/value head for its group of query heads.
  const bool grouped = enable_gqa && dim == 4 && key.dim() == 4 && query.size(0) == key.size(0) &&
                       key.size(1) > 0 && query.size(1) % key.size(1) == 0;
  const bool fused = dropout_p == 0.0 && (dim == 3 || dim == 4) && IsFloating(query) &&
                     key.scalar_type() == query.scalar_type() &&
                     value.scalar_type() == query.scalar_type() && key.dim() == dim &&
                     value.dim() == dim && (same_heads || grouped) &&
                     key.sizes().slice(0, key.dim() - 2) == value.sizes().slice(0, value.dim() - 2);
  return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_fused_sdp_choice", TORCH_FN(FusedSdpChoice)); }

}  // namespace torch_tpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::aten::FusedSdpChoice);
}  // namespace at::native
