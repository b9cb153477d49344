// Kernels registered directly for PrivateUse1: allocation, views (metadata only), resizing,
// copies and host reads. Every other op goes through the lowering fallback (fallback.cc).
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/InferSize.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

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
  m.impl("view", TORCH_FN(View));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
}

}  // namespace torch_tpu::aten
