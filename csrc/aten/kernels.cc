// Kernels registered directly for PrivateUse1: allocation, views (metadata only), resizing,
// copies and host reads. Every other op goes through the lowering fallback (fallback.cc).
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/InferSize.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "aten/tpu_tensor.h"

namespace torch_tpu::aten {

namespace {

c10::DeviceIndex DeviceIndexOf(std::optional<c10::Device> device) {
  if (!device || !device->has_index()) return CurrentDeviceIndex();
  return device->index();
}

at::Tensor Empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const auto type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  at::Tensor result = EmptyTpuContiguous(size, type, DeviceIndexOf(device));
  if (memory_format && *memory_format != c10::MemoryFormat::Contiguous &&
      *memory_format != c10::MemoryFormat::Preserve) {
    result.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return result;
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<at::ScalarType> dtype, std::optional<c10::Layout>,
                        std::optional<c10::Device> device, std::optional<bool>) {
  return EmptyTpu(size, stride, dtype.value_or(c10::get_default_dtype_as_scalartype()),
                  DeviceIndexOf(device));
}

const at::Tensor& Resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  std::vector<int64_t> sizes;
  for (const auto& s : size) sizes.push_back(s.guard_int(__FILE__, __LINE__));
  for (int64_t s : sizes)
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", sizes);
  ResizeTpu(self, sizes, std::nullopt);
  if (memory_format && *memory_format != c10::MemoryFormat::Preserve) {
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& SetStorage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                       c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  std::vector<int64_t> sizes, strides;
  for (const auto& s : size) sizes.push_back(s.guard_int(__FILE__, __LINE__));
  for (const auto& s : stride) strides.push_back(s.guard_int(__FILE__, __LINE__));
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset.guard_int(__FILE__, __LINE__));
  ResizeTpu(self, sizes, strides);
  return self;
}

// set_(storage): the whole storage as a 1-D tensor (UntypedStorage.copy_ and .cpu() use it).
at::Tensor& SetWholeStorage(at::Tensor& self, c10::Storage source) {
  const auto elements = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  std::vector<c10::SymInt> size{c10::SymInt(elements)}, stride{c10::SymInt(1)};
  return SetStorage(self, std::move(source), 0, size, stride);
}

at::Tensor& SetTensor(at::Tensor& self, const at::Tensor& source) {
  if (!self.is_same(source)) {
    std::vector<c10::SymInt> sizes(source.sym_sizes().begin(), source.sym_sizes().end());
    std::vector<c10::SymInt> strides(source.sym_strides().begin(), source.sym_strides().end());
    SetStorage(self, source.storage(), source.sym_storage_offset(), sizes, strides);
  }
  return self;
}

at::Tensor& SetEmpty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, GetTpuAllocator(), true);
  std::vector<c10::SymInt> zero = {0};
  std::vector<c10::SymInt> one = {1};
  return SetStorage(self, storage, 0, zero, one);
}

// The checks of the CPU's copy_ (a TensorIterator with resize_outputs(false)), in its order:
// a copy onto the same data is a no-op, overlapping memory is rejected, then shapes broadcast.
// Both tensors may share one storage here, so these checks keep CPU semantics for aliasing.
bool CheckCopy(const at::Tensor& self, const at::Tensor& src) {
  if (self.is_same(src)) return false;
  const bool same_data = self.is_alias_of(src) && self.storage_offset() == src.storage_offset() &&
                         self.strides().equals(src.strides()) && self.sizes().equals(src.sizes()) &&
                         self.scalar_type() == src.scalar_type();
  if (same_data) return false;
  at::assert_no_internal_overlap(self);
  at::assert_no_partial_overlap(self, src);
  const auto shape = at::infer_size_dimvector(self.sizes(), src.sizes());
  TORCH_CHECK(c10::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  return true;
}

at::Tensor& Copy(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  // Uploads finish reading host memory before returning and downloads wait for their values, so
  // non_blocking needs nothing extra.
  (void)non_blocking;
  TORCH_CHECK(self.defined() && src.defined(), "copy_: tensors must be defined");
  if (!CheckCopy(self, src)) return self;
  if (self.is_privateuseone() && src.is_privateuseone()) {
    CopyTpuToTpu(self, src);
  } else if (self.is_privateuseone()) {
    CopyHostToTpu(self, src);
  } else {
    CopyTpuToHost(self, src);
  }
  // PyTorch's lazy conjugate and negative views are resolved by the copy, as its own copy_ does.
  if (self.is_conj() != src.is_conj()) self.conj_physical_();
  if (self.is_neg() != src.is_neg()) self.neg_();
  return self;
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  Copy(out, self, non_blocking);
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (dst.is_privateuseone()) {
      ResizeTpu(dst, self.sizes(), std::nullopt);
    } else {
      at::native::resize_(dst, self.sizes());
    }
  }
  at::Tensor out = dst;
  Copy(out, self, false);
  return dst;
}

c10::Scalar LocalScalarDense(const at::Tensor& self) {
  // item() of any one-element tensor, e.g. x[1:2, 3:4], not only of 0-d ones.
  at::Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU));
  CopyTpuToHost(host, self);
  return host.item();
}

bool Equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", other.device(), "!");
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item().toBool();
}

at::Tensor View(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

// `param.data = moved` (Module.to) keeps the Parameter object, and so weight tying, only when the
// two tensor types can shallow-copy each other: plain strided tensors on the CPU and tpu can, as
// CPU and CUDA tensors can.
bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto plain = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.is_cpu() || t.is_privateuseone());
  };
  return plain(self) && plain(from);
}

// Data-dependent shapes: the result's size is only known from the values, so these read the
// values on the host (a sync, as on CUDA), then continue on the device.
at::Tensor Nonzero(const at::Tensor& self) { return self.cpu().nonzero().to(self.device()); }

at::Tensor MaskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto [values, where] = at::expand_outplace(self, mask);
  const at::Tensor positions = Nonzero(where->reshape({-1})).select(1, 0);
  return values->reshape({-1}).index_select(0, positions);
}

// The rest compute on the device and read back only the one or two numbers that set the size.

// Both numbers in one transfer: [a, b] of 0-d device tensors, on the host.
std::pair<int64_t, int64_t> ReadPair(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor host =
      at::cat({a.reshape({1}).to(at::kLong), b.reshape({1}).to(at::kLong)}).cpu();
  return {host[0].item<int64_t>(), host[1].item<int64_t>()};
}

bool IsIntegral(at::ScalarType type) { return c10::isIntegralType(type, /*includeBool=*/false); }

// bincount(self, weights, minlength): counts (or summed weights) of each value 0..max(self).
// Reads min(self) (negative values are an error) and max(self) (the output size).
at::Tensor Bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt,
                    int64_t minlength) {
  TORCH_CHECK_NOT_IMPLEMENTED(IsIntegral(self.scalar_type()),
                              "\"bincount_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  const auto options = self.options().dtype(at::kLong);
  if (self.dim() == 1 && self.numel() == 0) return at::zeros({minlength}, options);
  const char* domain = "bincount only supports 1-d non-negative integral inputs.";
  TORCH_CHECK(self.dim() == 1, domain);
  auto [min, max] = self.aminmax();
  const auto [low, high] = ReadPair(min, max);
  TORCH_CHECK(low >= 0, domain);
  TORCH_CHECK(high < std::numeric_limits<int64_t>::max(),
              "maximum value of input overflowed, it should be < ",
              std::numeric_limits<int64_t>::max(), " but got ", high);
  const int64_t bins = std::max(high + 1, minlength);
  const at::Tensor index = self.to(at::kLong);
  if (!weights_opt || !weights_opt->defined()) {
    return at::zeros({bins}, options).index_add_(0, index, at::ones({self.size(0)}, options));
  }
  const at::Tensor& weights = *weights_opt;
  TORCH_CHECK(weights.dim() == 1 && weights.size(0) == self.size(0),
              "weights should be 1-d and have the same length as input");
  // The CPU sums float weights in float and every other dtype in double.
  const auto type = weights.scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  return at::zeros({bins}, weights.options().dtype(type)).index_add_(0, index, weights.to(type));
}

// The order that sorts the rows of `rows` ([n, k]) lexicographically: stable sorts by the last
// column, then by each earlier one (k sorts, one program each, reused across columns).
at::Tensor LexicographicOrder(const at::Tensor& rows) {
  at::Tensor order;
  for (int64_t column = rows.size(1) - 1; column >= 0; --column) {
    at::Tensor keys = rows.select(1, column);
    if (order.defined()) keys = keys.index_select(0, order);
    const at::Tensor step = std::get<1>(keys.sort(/*stable=*/true, 0, /*descending=*/false));
    order = order.defined() ? order.index_select(0, step) : step;
  }
  return order;
}

struct UniqueRows {
  at::Tensor values;   // [count, k]: the first row of each run
  at::Tensor inverse;  // [n]: each input row's run
  at::Tensor counts;   // [count]
};

// The runs of equal rows of `rows` ([n, k], n > 0), after sorting them when `sort` is set
// (unique) or as they come (unique_consecutive). Rows differ where any element compares unequal,
// so each NaN is a run of its own, as on the CPU. Reads the number of runs.
UniqueRows FindRuns(const at::Tensor& rows, bool sort) {
  const int64_t n = rows.size(0);
  const auto options = rows.options().dtype(at::kLong);
  const at::Tensor order = sort ? LexicographicOrder(rows) : at::Tensor();
  const at::Tensor ordered = sort ? rows.index_select(0, order) : rows;
  at::Tensor run = at::zeros({n}, options);
  if (n > 1) {
    const at::Tensor starts_run = ordered.slice(0, 1).ne(ordered.slice(0, 0, n - 1)).any(1);
    run = at::cat({at::zeros({1}, options), starts_run.cumsum(0)});
  }
  const int64_t count = run[n - 1].item<int64_t>() + 1;
  // Where each run starts: the smallest position with its run number.
  const at::Tensor positions = at::arange(n, options);
  const at::Tensor starts =
      at::empty({count}, options).scatter_reduce_(0, run, positions, "amin", false);
  UniqueRows result;
  result.values = ordered.index_select(0, starts);
  result.counts = at::cat({starts.slice(0, 1), at::full({1}, n, options)}).sub_(starts);
  result.inverse = sort ? at::empty({n}, options).index_copy_(0, order, run) : run;
  return result;
}

// _unique2(self, sorted, return_inverse, return_counts) and unique_consecutive(self,
// return_inverse, return_counts, dim=None) over the flattened input. The CPU always sorts, so
// sorted=False gives the sorted result too. Unrequested inverse and counts are empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor> UniqueFlat(const at::Tensor& self, bool sort,
                                                          bool return_inverse, bool return_counts) {
  const auto options = self.options().dtype(at::kLong);
  at::Tensor empty = at::empty({0}, options);
  if (self.numel() == 0) {
    return {at::empty({0}, self.options()),
            return_inverse ? at::empty(self.sizes(), options) : empty, empty};
  }
  UniqueRows runs = FindRuns(self.reshape({-1, 1}), sort);
  return {runs.values.reshape({-1}), return_inverse ? runs.inverse.view(self.sizes()) : empty,
          return_counts ? runs.counts : empty};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> Unique2(const at::Tensor& self, bool sorted,
                                                       bool return_inverse, bool return_counts) {
  (void)sorted;
  return UniqueFlat(self, true, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor> UniqueLegacy(const at::Tensor& self, bool sorted,
                                                bool return_inverse) {
  auto [values, inverse, counts] = Unique2(self, sorted, return_inverse, false);
  return {values, inverse};
}

// Unique slices along `dim`: the slices as rows of [n, k]. Inverse and counts are always
// computed, as the CPU does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> UniqueAlong(const at::Tensor& self, int64_t dim,
                                                           bool sort) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const auto options = self.options().dtype(at::kLong);
  const auto sizes = self.sizes();
  const auto zero_dims = std::count(sizes.begin(), sizes.end(), 0);
  if (self.size(dim) == 0) {
    TORCH_CHECK(zero_dims == 1,
                "Number of zero sized dimensions is more than one, so unique cannot be applied ");
    return {at::empty(sizes, self.options()), at::empty({0}, options), at::empty({0}, options)};
  }
  TORCH_CHECK(
      zero_dims == 0,
      "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  const at::Tensor moved = self.movedim(dim, 0);
  UniqueRows runs = FindRuns(moved.reshape({self.size(dim), -1}), sort);
  std::vector<int64_t> shape = moved.sizes().vec();
  shape[0] = runs.values.size(0);
  at::Tensor values = runs.values.view(shape).movedim(0, dim).contiguous();
  return {values, runs.inverse, runs.counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> UniqueDim(const at::Tensor& self, int64_t dim,
                                                         bool sorted, bool return_inverse,
                                                         bool return_counts) {
  (void)sorted, (void)return_inverse, (void)return_counts;
  return UniqueAlong(self, dim, true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> UniqueConsecutive(const at::Tensor& self,
                                                                 bool return_inverse,
                                                                 bool return_counts,
                                                                 std::optional<int64_t> dim) {
  if (!dim) return UniqueFlat(self, false, return_inverse, return_counts);
  return UniqueAlong(self, *dim, false);
}

// repeat_interleave(repeats, output_size): i repeated repeats[i] times. Output position j holds
// the number of inclusive prefix sums of repeats at or below j: a count of the sums (those past
// the end dropped) followed by a prefix sum. Without output_size, reads the total (the size) and
// min(repeats) (negative repeats are an error). A wrong output_size is not detected.
at::Tensor RepeatInterleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  const auto type = repeats.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(type == at::kInt || type == at::kLong,
                              "\"repeat_interleave_cpu\" not implemented for '",
                              c10::toString(type), "'");
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  if (repeats.size(0) == 0) return at::empty_like(repeats, at::MemoryFormat::Contiguous);
  const at::Tensor ends = repeats.cumsum(0);  // int64
  int64_t total = 0;
  if (output_size) {
    total = output_size->guard_int(__FILE__, __LINE__);
  } else {
    const auto [sum, min] = ReadPair(ends[-1], repeats.min());
    total = sum;
    TORCH_CHECK(min >= 0, "repeats can not be negative");
  }
  const auto options = repeats.options().dtype(at::kLong);
  const at::Tensor reached =
      at::zeros({total + 1}, options).index_add_(0, ends.clamp(0, total), at::ones_like(ends));
  return reached.slice(0, 0, total).cumsum(0).to(type);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(Empty));
  m.impl("empty_strided", TORCH_FN(EmptyStrided));
  m.impl("resize_", TORCH_FN(Resize));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(SetStorage));
  m.impl("set_.source_Tensor", TORCH_FN(SetTensor));
  m.impl("set_.source_Storage", TORCH_FN(SetWholeStorage));
  m.impl("set_", TORCH_FN(SetEmpty));
  m.impl("copy_", TORCH_FN(Copy));
  m.impl("_copy_from", TORCH_FN(CopyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(CopyFromAndResize));
  m.impl("_local_scalar_dense", TORCH_FN(LocalScalarDense));
  m.impl("equal", TORCH_FN(Equal));
  m.impl("nonzero", TORCH_FN(Nonzero));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(HasCompatibleShallowCopyType));
  m.impl("masked_select", TORCH_FN(MaskedSelect));
  m.impl("bincount", TORCH_FN(Bincount));
  m.impl("_unique", TORCH_FN(UniqueLegacy));
  m.impl("_unique2", TORCH_FN(Unique2));
  m.impl("unique_dim", TORCH_FN(UniqueDim));
  m.impl("unique_consecutive", TORCH_FN(UniqueConsecutive));
  m.impl("repeat_interleave.Tensor", TORCH_FN(RepeatInterleave));
  m.impl("view", TORCH_FN(View));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
}

}  // namespace torch_tpu::aten
