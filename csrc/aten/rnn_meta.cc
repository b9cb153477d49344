// Meta kernels for _thnn_fused_gru_cell and its backward, which PyTorch gives none (the LSTM cell
// has Python ones): the fallback needs the output shapes before it calls the lowerings in
// csrc/ops/rnn.cc. The checks are those the lowerings rely on.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace torch_tpu::aten {
namespace {

std::tuple<at::Tensor, at::Tensor> FusedGruCellMeta(const at::Tensor& input_gates,
                                                    const at::Tensor& hidden_gates,
                                                    const at::Tensor& hx,
                                                    const std::optional<at::Tensor>& input_bias,
                                                    const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && hx.dim() == 2,
              "_thnn_fused_gru_cell: expected 2-D input_gates and hx, got ", input_gates.sizes(),
              " and ", hx.sizes());
  const int64_t batch = hx.size(0);
  const int64_t hidden = hx.size(1);
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "_thnn_fused_gru_cell: input_gates ",
              input_gates.sizes(), " and hidden_gates ", hidden_gates.sizes(), " differ");
  TORCH_CHECK(input_gates.size(0) == batch && input_gates.size(1) == 3 * hidden,
              "_thnn_fused_gru_cell: expected gates of shape [", batch, ", ", 3 * hidden, "], got ",
              input_gates.sizes());
  for (const auto& bias : {input_bias, hidden_bias}) {
    TORCH_CHECK(!bias || !bias->defined() || (bias->dim() == 1 && bias->size(0) == 3 * hidden),
                "_thnn_fused_gru_cell: expected a bias of shape [", 3 * hidden, "], got ",
                bias->sizes());
  }
  return {at::empty_like(hx, at::MemoryFormat::Contiguous),
          at::empty({batch, 5 * hidden}, input_gates.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> FusedGruCellBackwardMeta(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == 5 * grad_hy.size(1),
              "_thnn_fused_gru_cell_backward: expected a workspace of shape [", grad_hy.size(0),
              ", ", 5 * grad_hy.size(1), "], got ", workspace.sizes());
  const int64_t gates = 3 * grad_hy.size(1);
  const auto options = workspace.options();
  at::Tensor bias = has_bias ? at::empty({gates}, options) : at::Tensor();
  return {at::empty({grad_hy.size(0), gates}, options),
          at::empty({grad_hy.size(0), gates}, options),
          at::empty_like(grad_hy, at::MemoryFormat::Contiguous), bias,
          has_bias ? at::empty({gates}, options) : at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_thnn_fused_gru_cell", TORCH_FN(FusedGruCellMeta));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(FusedGruCellBackwardMeta));
}

}  // namespace torch_tpu::aten
