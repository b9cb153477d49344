// linalg_lstsq on tpu. The out= op's lowering (csrc/ops/qr.cc) computes everything in the
// program; as the CPU's linalg_lstsq_out does for gelsd and gelss, the residuals are then kept
// only if every matrix of A has full rank n, a host read of the rank (the CPU's too).
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/linalg_lstsq.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>

namespace torch_tpu::aten {
namespace {

using LstsqResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

LstsqResult Lstsq(const at::Tensor& input, const at::Tensor& other, std::optional<double> rcond,
                  std::optional<c10::string_view> driver) {
  const c10::ScalarType real = c10::toRealValueType(input.scalar_type());
  at::Tensor solution = at::empty({0}, input.options());
  at::Tensor residuals = at::empty({0}, input.options().dtype(real));
  at::Tensor rank = at::empty({0}, input.options().dtype(at::kLong));
  at::Tensor singular_values = at::empty({0}, input.options().dtype(real));
  at::linalg_lstsq_outf(input, other, rcond, driver, solution, residuals, rank, singular_values);
  const std::string name = driver ? std::string(*driver) : "gelsy";
  if ((name == "gelsd" || name == "gelss") && residuals.numel() > 0 && rank.numel() > 0 &&
      !at::all(at::eq(rank, input.size(-1))).item<bool>()) {
    residuals = at::empty({0}, input.options().dtype(real));
  }
  return {solution, residuals, rank, singular_values};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("linalg_lstsq", TORCH_FN(Lstsq)); }

}  // namespace torch_tpu::aten
