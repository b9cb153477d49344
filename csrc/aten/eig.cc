// linalg_eig and _linalg_eigvals on tpu: the CPU's checks, in the CPU's order and with its
// messages (PyTorch's Python meta functions raise other exception types), before the out= ops'
// lowerings (csrc/ops/eig.cc) compute the decomposition in the program. Like the CPU (and CUDA),
// eig reads on the host whether the input is finite; eigvals does not check.
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/linalg_eig.h>
#include <ATen/ops/linalg_eigvals.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <tuple>

namespace torch_tpu::aten {
namespace {

// LAPACK's geev kernels: float, double and their complex types.
void CheckEigDtype(c10::ScalarType dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(dtype == at::kFloat || dtype == at::kDouble ||
                                  dtype == at::kComplexFloat || dtype == at::kComplexDouble,
                              "\"linalg_eig_out_cpu\" not implemented for '", c10::toString(dtype),
                              "'");
}

std::tuple<at::Tensor, at::Tensor> LinalgEig(const at::Tensor& input) {
  const c10::ScalarType complex_dtype = c10::toComplexType(input.scalar_type());
  TORCH_CHECK(at::all(at::isfinite(input)).item<bool>(),
              "torch.linalg.eig: input tensor should not contain infs or NaNs.");
  at::native::squareCheckInputs(input, "linalg.eig");
  CheckEigDtype(input.scalar_type());
  at::Tensor values = at::empty({0}, input.options().dtype(complex_dtype));
  at::Tensor vectors = at::empty({0}, input.options().dtype(complex_dtype));
  at::linalg_eig_outf(input, values, vectors);
  return {values, vectors};
}

at::Tensor LinalgEigvals(const at::Tensor& input) {
  const c10::ScalarType complex_dtype = c10::toComplexType(input.scalar_type());
  at::native::squareCheckInputs(input, "linalg.eigvals");
  CheckEigDtype(input.scalar_type());
  at::Tensor values = at::empty({0}, input.options().dtype(complex_dtype));
  at::linalg_eigvals_outf(input, values);
  return values;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_eig", TORCH_FN(LinalgEig));
  m.impl("_linalg_eigvals", TORCH_FN(LinalgEigvals));
}

}  // namespace torch_tpu::aten
