// Meta kernels for geqrf and linalg_lstsq.out, which PyTorch gives none: the fallback needs the
// output shapes before it calls the lowerings in csrc/ops/qr.cc. The checks and messages are the
// CPU kernels'; LAPACK's outputs get their column-major strides, as on the CPU.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace torch_tpu::aten {
namespace {

void CheckGeqrfInput(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
}

// (*, min(m, n)): one scalar factor per reflector.
std::vector<int64_t> TauShape(const at::Tensor& input) {
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - 2);
  shape.push_back(std::min(input.size(-2), input.size(-1)));
  return shape;
}

// Batched column-major strides: each matrix is stored by columns, the batch row-major.
std::vector<int64_t> ColumnMajorStrides(at::IntArrayRef sizes) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> strides(rank);
  strides[rank - 2] = 1;
  strides[rank - 1] = std::max<int64_t>(sizes[rank - 2], 1);
  int64_t stride = sizes[rank - 2] * sizes[rank - 1];
  for (int64_t d = rank - 3; d >= 0; --d) {
    strides[d] = std::max<int64_t>(stride, 1);
    stride *= sizes[d];
  }
  return strides;
}

std::tuple<at::Tensor, at::Tensor> GeqrfMeta(const at::Tensor& input) {
  CheckGeqrfInput(input);
  at::Tensor a =
      at::empty_strided(input.sizes(), ColumnMajorStrides(input.sizes()), input.options());
  return {a, at::empty(TauShape(input), input.options())};
}

std::tuple<at::Tensor&, at::Tensor&> GeqrfOutMeta(const at::Tensor& input, at::Tensor& a,
                                                  at::Tensor& tau) {
  CheckGeqrfInput(input);
  at::native::resize_output(a, input.sizes());
  at::native::resize_output(tau, TauShape(input));
  return {a, tau};
}

// ---- linalg_lstsq ----

void CheckLstsqArguments(const at::Tensor& input, const at::Tensor& other) {
  TORCH_CHECK(input.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(input.scalar_type() == other.scalar_type(),
              "torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
              "input's dtype ",
              input.scalar_type(), " and other's dtype ", other.scalar_type());
  const int64_t dim_diff = input.dim() - other.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1,
              "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
              "(input.dim() - other.dim()) <= 1");
  const int64_t other_rows = dim_diff == 1 ? other.size(-1) : other.size(-2);
  TORCH_CHECK(input.size(-2) == other_rows,
              dim_diff == 1 ? "torch.linalg.lstsq: input.size(-2) should match other.size(-1)"
                            : "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
}

// The CPU's default driver is gelsy; any other name must be one of LAPACK's four.
std::string LstsqDriver(const std::optional<c10::string_view>& driver) {
  const std::string name = driver ? std::string(*driver) : "gelsy";
  TORCH_CHECK(
      name == "gels" || name == "gelsy" || name == "gelsd" || name == "gelss",
      "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  return name;
}

// solution (*, n, nrhs) (or (*, n) for a vector `other`) is the top of LAPACK's column-major
// (*, max(m, n), nrhs) buffer; residuals (*, nrhs) when m > n, except from gelsy (gelsd's and
// gelss's only where every matrix has rank n, which linalg_lstsq checks after the fact:
// csrc/aten/lstsq.cc); rank (A's batch) from the rank-revealing drivers; singular values
// (A's batch, min(m, n)) from gelsd and gelss.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> LstsqOutMeta(
    const at::Tensor& input, const at::Tensor& other, std::optional<double> /*rcond*/,
    std::optional<c10::string_view> driver, at::Tensor& solution, at::Tensor& residuals,
    at::Tensor& rank, at::Tensor& singular_values) {
  CheckLstsqArguments(input, other);
  const std::string name = LstsqDriver(driver);
  // The CPU's message; its LAPACK kernels are float, double and their complex types.
  TORCH_CHECK(at::isFloatingType(input.scalar_type()) || at::isComplexType(input.scalar_type()),
              "This function doesn't handle types other than float and double");
  TORCH_CHECK(input.scalar_type() != at::kHalf && input.scalar_type() != at::kBFloat16 &&
                  input.scalar_type() != at::kComplexHalf,
              "This function doesn't handle types other than float and double");
  const bool vector_case = input.dim() - other.dim() == 1;
  const int64_t m = input.size(-2), n = input.size(-1);
  const int64_t nrhs = vector_case ? 1 : other.size(-1);
  const std::vector<int64_t> batch =
      at::infer_size(input.sizes().slice(0, input.dim() - 2),
                     other.sizes().slice(0, other.dim() - (vector_case ? 1 : 2)));
  std::vector<int64_t> buffer = batch;
  buffer.push_back(std::max(m, n));
  buffer.push_back(nrhs);
  std::vector<int64_t> sizes = batch, strides = ColumnMajorStrides(buffer);
  sizes.push_back(n);
  if (vector_case) {
    strides.pop_back();
  } else {
    sizes.push_back(nrhs);
  }
  int64_t storage = 1;
  for (int64_t size : buffer) storage *= size;
  at::native::resize_output(solution, {storage});
  solution.as_strided_(sizes, strides, 0);
  const std::vector<int64_t> input_batch(input.sizes().begin(), input.sizes().end() - 2);
  std::vector<int64_t> residual_sizes = batch, singular_sizes = input_batch;
  residual_sizes.push_back(nrhs);
  singular_sizes.push_back(std::min(m, n));
  const bool has_residuals = name != "gelsy" && m > n;
  at::native::resize_output(residuals, has_residuals ? residual_sizes : std::vector<int64_t>{0});
  at::native::resize_output(rank, name == "gels" ? std::vector<int64_t>{0} : input_batch);
  const bool has_singular = name == "gelsd" || name == "gelss";
  at::native::resize_output(singular_values,
                            has_singular ? singular_sizes : std::vector<int64_t>{0});
  return {solution, residuals, rank, singular_values};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("geqrf", TORCH_FN(GeqrfMeta));
  m.impl("geqrf.a", TORCH_FN(GeqrfOutMeta));
  m.impl("linalg_lstsq.out", TORCH_FN(LstsqOutMeta));
}

}  // namespace torch_tpu::aten
