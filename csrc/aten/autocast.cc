// Autocast for tpu: the AutocastPrivateUse1 kernels. The op lists and cast policies are PyTorch's
// own (the AT_FORALL_* macros of ATen/autocast_mode.h, which CUDA, XPU and MPS also expand), so
// torch.autocast("tpu") casts exactly the ops CUDA's autocast casts, the same way. The wrappers
// cast the arguments and redispatch with AutocastPrivateUse1 excluded; the cast ops and the op
// itself then reach the tpu kernels like any other call. PyTorch registers nothing for
// AutocastPrivateUse1 itself (not even the fallthrough), so this file owns the whole key.
//
// The lower-precision dtype is at::autocast::get_autocast_dtype(kPrivateUse1); torch_tpu.amp makes
// bfloat16 its default. GradScaler's two device ops (unscale with the inf/NaN check, and the scale
// update) are here too, as PrivateUse1 kernels composed of lowered ops.
#include <ATen/autocast_mode.h>
#if __has_include(<ATen/core/Dimname.h>)
#include <ATen/core/Dimname.h>
#endif
#include <torch/library.h>

namespace torch_tpu::aten {

namespace {

// As on CUDA: binary_cross_entropy is unsafe in lower precision, so autocast refuses it and points
// to the logits form (which runs in float32).
at::Tensor BinaryCrossEntropyRefused(const at::Tensor&, const at::Tensor&,
                                     const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and "
              "BCEWithLogits are\n"
              "safe to autocast.");
}

// GradScaler's two ops (torch.amp.GradScaler("tpu"), for float16 autocast), composed of ops the
// lowering library has, all on the device: no host read. The semantics are CUDA's kernels'.

// Multiplies every tensor by inv_scale, and sets found_inf to 1 when any holds an inf or a NaN.
void NonFiniteCheckAndUnscale(at::TensorList tensors, at::Tensor& found_inf,
                              const at::Tensor& inv_scale) {
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  if (tensors.empty()) return;
  at::Tensor any_non_finite;
  for (const at::Tensor& tensor : tensors) {
    TORCH_CHECK(tensor.device() == inv_scale.device(),
                "all tensors must be on the same device as inv_scale: ", tensor.device(), " and ",
                inv_scale.device());
    TORCH_CHECK(at::isFloatingType(tensor.scalar_type()),
                "_amp_foreach_non_finite_check_and_unscale_ expects floating tensors, got ",
                tensor.scalar_type());
    at::Tensor non_finite = at::logical_not(at::isfinite(tensor)).any();
    any_non_finite =
        any_non_finite.defined() ? at::logical_or(any_non_finite, non_finite) : non_finite;
    tensor.mul_(inv_scale);
  }
  found_inf.copy_(
      at::where(any_non_finite.reshape(found_inf.sizes()), at::ones_like(found_inf), found_inf));
}

// After a step: backs the scale off when found_inf is set, else grows it every growth_interval
// successful steps (when the grown scale is finite); growth_tracker counts the successful steps.
at::Tensor& UpdateScale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                        double growth_factor, double backoff_factor, int64_t growth_interval) {
  TORCH_CHECK(scale.numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(scale.scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  at::Tensor inf = found_inf.reshape(scale.sizes()).gt(0);
  at::Tensor successful = growth_tracker.reshape(scale.sizes()) + 1;
  at::Tensor grow = successful.ge(growth_interval);
  at::Tensor grown = scale * growth_factor;
  at::Tensor kept_or_grown = at::where(at::logical_and(grow, at::isfinite(grown)), grown, scale);
  at::Tensor new_scale = at::where(inf, scale * backoff_factor, kept_or_grown);
  at::Tensor new_tracker =
      at::where(at::logical_or(inf, grow), at::zeros_like(successful), successful);
  scale.copy_(new_scale);
  growth_tracker.copy_(new_tracker.reshape(growth_tracker.sizes()));
  return scale;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(NonFiniteCheckAndUnscale));
  m.impl("_amp_update_scale_", TORCH_FN(UpdateScale));
}

// The norm entries of AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spell their signatures unqualified.
#if __has_include(<ATen/core/Dimname.h>)
using at::DimnameList;  // torch 2.11's macros name it unqualified (2.13 has no named tensors)
#endif
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// Every op not listed below runs unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Matmuls, convolutions, RNN cells and attention: run in the autocast dtype.
#define TORCH_TPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TORCH_TPU_LOWER_PRECISION_FP)
#undef TORCH_TPU_LOWER_PRECISION_FP

  // Ops whose range or accuracy needs float32: pointwise transcendentals, norms, losses.
#define TORCH_TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TORCH_TPU_FP32)
#undef TORCH_TPU_FP32

  // Reductions and softmax with an optional dtype: float32 unless the caller names one.
#define TORCH_TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TORCH_TPU_FP32_SET_OPT_DTYPE)
#undef TORCH_TPU_FP32_SET_OPT_DTYPE

  // norm without a dtype argument: redispatched to the overload that takes one, with float32.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

  // Ops with several floating inputs: all of them cast to the widest input dtype.
#define TORCH_TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TORCH_TPU_PROMOTE)
#undef TORCH_TPU_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(BinaryCrossEntropyRefused));
}

}  // namespace

}  // namespace torch_tpu::aten
