// The deprecated torch.cholesky(A, upper): its own ATen op with a CPU kernel and no composite
// form, so it never reached linalg_cholesky_ex's lowering (csrc/ops/decomposition.cc). As the CPU
// kernel does, it factors (reading the triangle `upper` names) and raises from potrf's info on the
// host, with the CPU's messages; autograd stays PyTorch's cholesky_backward.
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torch_tpu::aten {
namespace {

at::Tensor CholeskyLegacy(const at::Tensor& self, bool upper) {
  TORCH_WARN_ONCE(
      "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be ",
      "removed in a future PyTorch release.\n", "L = torch.cholesky(A)\n",
      "should be replaced with\n", "L = torch.linalg.cholesky(A)\n",
      "and\n"
      "U = torch.cholesky(A, upper=True)\n",
      "should be replaced with\n",
      "U = torch.linalg.cholesky(A).mH\n"
      "This transform will produce equivalent results for all valid (symmetric positive definite) "
      "inputs.");
  // The CPU returns before any check for an empty input.
  if (self.numel() == 0) return at::empty_like(self, c10::MemoryFormat::Contiguous);
  at::native::squareCheckInputs(self, "cholesky");
  const at::ScalarType dtype = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(dtype == at::kFloat || dtype == at::kDouble ||
                                  dtype == at::kComplexFloat || dtype == at::kComplexDouble,
                              "\"cholesky_cpu\" not implemented for '", c10::toString(dtype), "'");
  auto [factor, info] = at::linalg_cholesky_ex(self, upper, /*check_errors=*/false);
  at::_linalg_check_errors(info, "cholesky", self.dim() == 2);
  return factor;
}

// As the CPU's cholesky_out: compute, then resize and copy into `out` (of a castable dtype).
at::Tensor& CholeskyLegacyOut(const at::Tensor& self, bool upper, at::Tensor& out) {
  at::native::checkSameDevice("cholesky", out, self);
  at::native::checkLinalgCompatibleDtype("cholesky", out, self);
  at::Tensor result = CholeskyLegacy(self, upper);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cholesky", TORCH_FN(CholeskyLegacy));
  m.impl("cholesky.out", TORCH_FN(CholeskyLegacyOut));
}

}  // namespace torch_tpu::aten
