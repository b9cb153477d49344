// Meta kernels for histogram (bin_ct and bins_tensor) and histogramdd's _histogramdd_from_bin_cts
// and _histogramdd_from_bin_tensors, which PyTorch gives none: the fallback needs their shapes
// before it calls the lowerings in csrc/ops/histogramdd.cc. The checks are the CPU kernel's
// (Histogram.cpp), with its messages and in its order, except the finiteness of a range taken from
// the data, which a device-side check raises at the next synchronization (aten/device_checks.h).
//
// Also the tpu kernel of _histogramdd_bin_edges, which returns a Tensor[] (the fallback handles
// only Tensor results): it composes ops that have lowerings.
#include <ATen/ops/empty.h>
#include <ATen/ops/histogram.h>
#include <ATen/ops/linspace.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "aten/device_checks.h"

namespace torch_tpu::aten {
namespace {

void CheckDtype(const at::Tensor& self) {
  const at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || t == at::kDouble,
                              "\"histogramdd\" not implemented for '", c10::toString(t), "'");
}

void CheckBinCounts(const std::vector<int64_t>& bins) {
  for (size_t d = 0; d < bins.size(); ++d) {
    TORCH_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d],
                " for dimension ", d);
  }
}

void CheckRange(std::optional<at::ArrayRef<double>> range, int64_t n) {
  if (!range.has_value()) return;
  TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * n, "torch.histogramdd: for a ", n,
              "-dimensional histogram range should have ", 2 * n, " elements, but got ",
              range->size());
  for (int64_t d = 0; d < n; ++d) {
    const double low = (*range)[2 * d], high = (*range)[2 * d + 1];
    TORCH_CHECK(std::isfinite(low) && std::isfinite(high), "torch.histogramdd: dimension ", d,
                "'s range [", low, ", ", high, "] is not finite");
    TORCH_CHECK(low <= high, "torch.histogramdd: min should not exceed max, but got", " min ", low,
                " max ", high, " for dimension ", d);
  }
}

// self as (M, N) points: its sizes without the innermost dim, for the weight check.
void CheckWeight(const at::Tensor& self, at::IntArrayRef points_shape,
                 const std::optional<at::Tensor>& weight) {
  if (!weight.has_value() || !weight->defined()) return;
  TORCH_CHECK(self.dtype() == weight->dtype(),
              "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
              "should have the same dtype, but got input(",
              self.dtype(), "), and weight(", weight->dtype(), ")");
  std::vector<int64_t> expected(points_shape.begin(), points_shape.end() - 1);
  std::vector<int64_t> got = weight->sizes().vec();
  if (got.empty()) got = {1};
  TORCH_CHECK(expected == got,
              "torch.histogramdd: if weight tensor is provided it should have the same shape as "
              "the input tensor excluding its innermost dimension, but got input with shape ",
              points_shape, " and weight with shape ", weight->sizes());
}

void CheckEdges(const at::Tensor& self, at::TensorList bins) {
  for (size_t d = 0; d < bins.size(); ++d) {
    TORCH_CHECK(self.dtype() == bins[d].dtype(),
                "torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
                "got input with dtype ",
                self.dtype(), " and bins for dimension ", d, " with dtype ", bins[d].dtype());
    TORCH_CHECK(bins[d].dim() == 1,
                "torch.histogramdd: bins tensor should have one dimension, but got ", bins[d].dim(),
                " dimensions in the bins tensor for dimension ", d);
    TORCH_CHECK(bins[d].numel() > 0,
                "torch.histogramdd: bins tensor should have at least 1 element, but got ",
                bins[d].numel(), " elements in the bins tensor for dimension ", d);
  }
}

std::vector<int64_t> BinCounts(at::TensorList bins) {
  std::vector<int64_t> counts;
  for (const at::Tensor& b : bins) counts.push_back(b.numel() - 1);
  return counts;
}

at::Tensor Empty(const std::vector<int64_t>& shape, const at::Tensor& like) {
  return at::empty(shape, like.options());
}

std::tuple<at::Tensor, at::Tensor> HistogramBinCountMeta(const at::Tensor& self, int64_t bins,
                                                         std::optional<at::ArrayRef<double>> range,
                                                         const std::optional<at::Tensor>& weight,
                                                         bool /*density*/) {
  CheckDtype(self);
  CheckBinCounts({bins});
  CheckRange(range, 1);
  const std::optional<at::Tensor> flat_weight =
      weight.has_value() && weight->defined() ? std::optional(weight->reshape({weight->numel()}))
                                              : std::nullopt;
  CheckWeight(self, {self.numel(), 1}, flat_weight);
  return {Empty({bins}, self), Empty({bins + 1}, self)};
}

std::tuple<at::Tensor, at::Tensor> HistogramBinTensorMeta(const at::Tensor& self,
                                                          const at::Tensor& bins,
                                                          const std::optional<at::Tensor>& weight,
                                                          bool /*density*/) {
  CheckDtype(self);
  CheckBinCounts({bins.numel() - 1});
  const std::optional<at::Tensor> flat_weight =
      weight.has_value() && weight->defined() ? std::optional(weight->reshape({weight->numel()}))
                                              : std::nullopt;
  CheckEdges(self, {bins});
  CheckWeight(self, {self.numel(), 1}, flat_weight);
  return {Empty({bins.numel() - 1}, self), Empty({bins.numel()}, self)};
}

void CheckPoints(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  CheckDtype(self);
}

at::Tensor HistogramddFromBinCountsMeta(const at::Tensor& self, at::IntArrayRef bins,
                                        std::optional<at::ArrayRef<double>> range,
                                        const std::optional<at::Tensor>& weight, bool /*density*/) {
  CheckPoints(self);
  CheckRange(range, self.size(-1));
  CheckWeight(self, self.sizes(), weight);
  CheckBinCounts(bins.vec());
  return Empty(bins.vec(), self);
}

at::Tensor HistogramddFromBinTensorsMeta(const at::Tensor& self, at::TensorList bins,
                                         const std::optional<at::Tensor>& weight,
                                         bool /*density*/) {
  CheckPoints(self);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == self.size(-1), "torch.histogramdd: expected ",
              self.size(-1), " sequences of bin edges for a ", self.size(-1),
              "-dimensional histogram but got ", bins.size());
  CheckEdges(self, bins);
  CheckWeight(self, self.sizes(), weight);
  CheckBinCounts(BinCounts(bins));
  return Empty(BinCounts(bins), self);
}

// _histogramdd_bin_edges(self, bins, range?, weight?, density): per dim, the CPU's linspace over
// the range, or over the data's min and max (histogram's edges for that column, computed on the
// device).
std::vector<at::Tensor> HistogramddBinEdges(const at::Tensor& self, at::IntArrayRef bins,
                                            std::optional<at::ArrayRef<double>> range,
                                            const std::optional<at::Tensor>& /*weight*/,
                                            bool /*density*/) {
  CheckPoints(self);
  const int64_t n = self.size(-1);
  CheckRange(range, n);
  CheckBinCounts(bins.vec());  // before histogram() would name the wrong dimension
  const at::Tensor points = self.reshape({-1, n});
  std::vector<at::Tensor> edges;
  for (int64_t d = 0; d < n; ++d) {
    if (!range.has_value()) {
      const ScopedHistogramDimension named(d);  // a non-finite column's error names d
      edges.push_back(std::get<1>(at::histogram(points.select(1, d), bins[d])));
      continue;
    }
    double low = (*range)[2 * d], high = (*range)[2 * d + 1];
    if (low == high) {  // widened as numpy does
      low -= 0.5;
      high += 0.5;
    }
    edges.push_back(at::linspace(low, high, bins[d] + 1, self.options()));
  }
  return edges;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_histogramdd_bin_edges", TORCH_FN(HistogramddBinEdges));
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("histogram.bin_ct", TORCH_FN(HistogramBinCountMeta));
  m.impl("histogram.bins_tensor", TORCH_FN(HistogramBinTensorMeta));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(HistogramddFromBinCountsMeta));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(HistogramddFromBinTensorsMeta));
}

}  // namespace torch_tpu::aten
