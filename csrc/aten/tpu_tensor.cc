#include "aten/tpu_tensor.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

#include "aten/device_checks.h"
#include "exec/context.h"
#include "exec/graph_plan.h"
#include "exec/graph_release.h"
#include "exec/pending.h"
#include "exec/profile.h"
#include "exec/scalar_upload.h"
#include "ops/builder.h"
#include "runtime/host_heap.h"

// From torch/csrc/autograd/graph_task.h, whose includes would weigh on this translation unit: the
// id of the backward pass (graph task) running on this thread, -1 when none is.
namespace torch::autograd {
TORCH_API int get_current_graph_task_id();
}  // namespace torch::autograd

namespace torch_tpu::aten {

namespace {

thread_local c10::DeviceIndex g_current_device = 0;

void DeleteStorage(void* context) { delete static_cast<exec::DeviceStorage*>(context); }

// Storages get unique, never-dereferenced addresses so PyTorch's alias and overlap checks work.
// Each device has its own 2^58-byte range, so an address also tells its device
// (getDeviceFromPtr); a range lasts for 2^58 bytes of allocations, far beyond any run.
constexpr int kAddressRangeBits = 58;
constexpr int kMaxAddressedDevices = 31;  // ranges 1..31, below 2^63

void* NextFakeAddress(size_t nbytes, c10::DeviceIndex device) {
  static std::array<std::atomic<uint64_t>, kMaxAddressedDevices> used{};
  TORCH_CHECK(device >= 0 && device < kMaxAddressedDevices, "torch_tpu supports at most ",
              kMaxAddressedDevices, " devices per process");
  const uint64_t size = (static_cast<uint64_t>(nbytes) + 127) & ~uint64_t{63};
  const uint64_t base = static_cast<uint64_t>(device + 1) << kAddressRangeBits;
  return reinterpret_cast<void*>(base + used[device].fetch_add(size + 64));
}

// A c10::DeviceAllocator, so torch.accelerator's memory APIs work. PJRT owns device memory, so
// reserved == allocated; emptyCache frees the buffers that only launched programs' graphs still
// hold (graph_release.h) and the kept copies of scalar arguments (scalar_upload.h), and gives the
// CPU plugin's kept free heap back to the OS.
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    exec::ReleaseRetiredGraphs();
    exec::ClearScalarUploads();
    runtime::ReleaseHostHeap();
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const exec::MemoryStats& stats = exec::GetMemoryStats(device);
    c10::CachingDeviceAllocator::DeviceStats result;
    for (auto* bytes : {&result.allocated_bytes, &result.reserved_bytes, &result.active_bytes,
                        &result.requested_bytes}) {
      auto& all = (*bytes)[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      all.current = stats.allocated.load();
      all.peak = stats.peak.load();
    }
    auto& count =
        result.allocation[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    count.allocated = stats.allocations.load();
    count.freed = stats.frees.load();
    count.current = count.allocated - count.freed;
    return result;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    exec::MemoryStats& stats = exec::GetMemoryStats(device);
    stats.allocations.store(stats.allocated.load() > 0 ? stats.allocations - stats.frees : 0);
    stats.frees.store(0);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    exec::MemoryStats& stats = exec::GetMemoryStats(device);
    stats.peak.store(stats.allocated.load());
  }
  // (free, total). The CPU plugin's memory is host memory.
  // TODO(device memory): ask PJRT_Device_MemoryStats on plugins that report a bytes limit.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex) override {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    return {page * static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)),
            page * static_cast<size_t>(sysconf(_SC_PHYS_PAGES))};
  }
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = CurrentDeviceIndex();
    auto* storage = new exec::DeviceStorage(nbytes, device);
    return c10::DataPtr(NextFakeAddress(nbytes, device), storage, &DeleteStorage,
                        c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "torch_tpu: storages cannot be copied with memcpy");
  }
};

}  // namespace

// Registered as the PrivateUse1 allocator: torch.accelerator's memory APIs look it up.
TpuAllocator g_tpu_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_tpu_allocator);

c10::Allocator* GetTpuAllocator() { return &g_tpu_allocator; }

std::optional<c10::DeviceIndex> DeviceOfAddress(const void* address) {
  const uint64_t range = reinterpret_cast<uint64_t>(address) >> kAddressRangeBits;
  if (range < 1 || range > kMaxAddressedDevices) return std::nullopt;
  return static_cast<c10::DeviceIndex>(range - 1);
}

exec::DeviceStorage* StorageOf(const c10::Storage& storage) {
  void* context = storage.data_ptr().get_context();
  TORCH_INTERNAL_ASSERT(context != nullptr, "tpu storage without a DeviceStorage");
  return static_cast<exec::DeviceStorage*>(context);
}

exec::DeviceStorage* StorageOf(const at::Tensor& tensor) { return StorageOf(tensor.storage()); }

void CheckDeviceIndex(c10::DeviceIndex index) {
  const int count = Translate([] { return static_cast<int>(exec::GetClient().devices().size()); });
  // PyTorch's wording for accelerator indices (as torch.tpu's Python checks say it too).
  TORCH_CHECK(index >= 0 && index < count, "Invalid device index tpu:", static_cast<int>(index),
              ". The device index is out of range. It must be in [0, ", count, "), but got ",
              static_cast<int>(index),
              ". Set TORCH_TPU_NUM_DEVICES to change the number of CPU devices.");
}

c10::DeviceIndex CurrentDeviceIndex() { return g_current_device; }
void SetCurrentDeviceIndex(c10::DeviceIndex index) { g_current_device = index; }

bool IsSupportedDType(at::ScalarType type) {
  switch (type) {
    case at::kBool:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kHalf:
    case at::kBFloat16:
    case at::kFloat:
    case at::kDouble:
    case at::kComplexFloat:
      return true;
    default:
      return false;
  }
}

ir::DType ToDType(at::ScalarType type) {
  switch (type) {
    case at::kBool:
      return ir::DType::kBool;
    case at::kByte:
      return ir::DType::kU8;
    case at::kChar:
      return ir::DType::kS8;
    case at::kShort:
      return ir::DType::kS16;
    case at::kInt:
      return ir::DType::kS32;
    case at::kLong:
      return ir::DType::kS64;
    case at::kHalf:
      return ir::DType::kF16;
    case at::kBFloat16:
      return ir::DType::kBF16;
    case at::kFloat:
      return ir::DType::kF32;
    case at::kDouble:
      return ir::DType::kF64;
    case at::kComplexFloat:
      return ir::DType::kC64;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "torch_tpu does not support dtype ", type,
                                  " on the tpu device");
  }
}

ops::Scalar ToScalar(const c10::Scalar& scalar) {
  ops::Scalar s;
  if (scalar.isBoolean()) {
    s.kind = ops::Scalar::Kind::kBool;
    s.i = scalar.toBool();
    s.f = static_cast<double>(s.i);
  } else if (scalar.isIntegral(false)) {
    s.kind = ops::Scalar::Kind::kInt;
    s.i = scalar.toLong();
    s.f = static_cast<double>(s.i);
  } else if (scalar.isComplex()) {
    const c10::complex<double> z = scalar.toComplexDouble();
    s.kind = ops::Scalar::Kind::kComplex;
    s.f = z.real();
    s.imag = z.imag();
    s.i = static_cast<int64_t>(s.f);
  } else {
    s.kind = ops::Scalar::Kind::kFloat;
    s.f = scalar.toDouble();
    s.i = static_cast<int64_t>(s.f);
  }
  return s;
}

ir::Value ScalarParameter(const ops::Scalar& scalar, ir::DType dtype) {
  ir::HostScalar host;
  host.dtype = dtype;
  auto store = [&](auto v) { std::memcpy(host.bytes, &v, sizeof(v)); };
  const bool is_float = scalar.IsFloatLike();
  switch (dtype) {
    case ir::DType::kBool:
      host.bytes[0] = is_float ? scalar.f != 0 : scalar.i != 0;
      break;
    case ir::DType::kS8:
      store(static_cast<int8_t>(scalar.ToInt()));
      break;
    case ir::DType::kS16:
      store(static_cast<int16_t>(scalar.ToInt()));
      break;
    case ir::DType::kS32:
      store(static_cast<int32_t>(scalar.ToInt()));
      break;
    case ir::DType::kS64:
      store(static_cast<int64_t>(scalar.ToInt()));
      break;
    case ir::DType::kU8:
      store(static_cast<uint8_t>(scalar.ToInt()));
      break;
    case ir::DType::kU16:
      store(static_cast<uint16_t>(scalar.ToInt()));
      break;
    case ir::DType::kU32:
      store(static_cast<uint32_t>(scalar.ToInt()));
      break;
    case ir::DType::kU64:
      store(static_cast<uint64_t>(scalar.ToInt()));
      break;
    case ir::DType::kF16:
      store(c10::Half(static_cast<float>(scalar.ToDouble())).x);
      break;
    case ir::DType::kBF16:
      store(c10::BFloat16(static_cast<float>(scalar.ToDouble())).x);
      break;
    case ir::DType::kF32:
      store(static_cast<float>(scalar.ToDouble()));
      break;
    case ir::DType::kF64:
      store(scalar.ToDouble());
      break;
    case ir::DType::kC64:
      store(c10::complex<float>(static_cast<float>(scalar.ToDouble()),
                                static_cast<float>(scalar.imag)));
      break;
  }
  return ir::MakeScalarParameter(host);
}

namespace {

ops::Scalar CpuScalarValue(const at::Tensor& tensor) { return ToScalar(tensor.item()); }

// The storage's value to read views of `dtype` through, and its length in `dtype` elements: a
// padded growing value whose elements lead it is read as it is (a view of its first elements
// does not depend on the padding), any other is compacted to the storage's elements.
ir::Value ReadStorage(exec::DeviceStorage* storage, ir::DType dtype, int64_t* elements) {
  ir::Value value = storage->Read(dtype);
  *elements = storage->elements(dtype);
  if (!storage->padded()) return value;
  const exec::GrowingLayout& layout = *storage->growing();
  if (layout.logical_prefix()) {
    *elements = value.shape()[0] * static_cast<int64_t>(ir::ByteSize(value.dtype())) /
                static_cast<int64_t>(ir::ByteSize(dtype));
    return value;
  }
  return ops::CompactGrowing(value, layout.padded_shape, layout.dim, layout.length);
}

// Whether a tensor is all of its storage's bytes, contiguous from the first.
bool IsWholeStorageOf(const at::Tensor& tensor, exec::DeviceStorage* storage) {
  return tensor.storage_offset() == 0 && tensor.is_contiguous() &&
         storage->nbytes() == static_cast<size_t>(tensor.numel()) * tensor.itemsize();
}

// The same, with no lazy conjugate or negative bit: its logical values are its stored ones.
bool IsPlainWholeStorageOf(const at::Tensor& tensor, exec::DeviceStorage* storage) {
  return !tensor.is_conj() && !tensor.is_neg() && IsWholeStorageOf(tensor, storage);
}

ir::Shape SizesOf(const at::Tensor& tensor) {
  return ir::Shape(tensor.sizes().begin(), tensor.sizes().end());
}

}  // namespace

ops::GrowingValue ReadGrowing(const at::Tensor& tensor) {
  if (!tensor.is_privateuseone()) return {};
  exec::DeviceStorage* storage = StorageOf(tensor);
  const exec::GrowingLayout* layout = storage->growing();
  if (layout == nullptr || exec::ActiveGraphCapture() != nullptr) return {};
  const ir::DType dtype = ToDType(tensor.scalar_type());
  if (storage->element_type() != dtype || !IsPlainWholeStorageOf(tensor, storage)) return {};
  const ir::Shape sizes = SizesOf(tensor);
  std::optional<exec::GrowingLayout> view;
  if (!layout->Describes(sizes)) {
    view = layout->AsUnitDimsView(sizes);
    if (!view) return {};
    layout = &*view;
  }
  ops::GrowingValue grown;
  grown.padded = ops::Reshape(storage->Read(dtype), layout->padded_shape);
  grown.dim = layout->dim;
  grown.length = layout->length;
  ops::Scalar length;
  length.i = layout->length;
  grown.length_parameter = ScalarParameter(length, ir::DType::kS64);
  return grown;
}

bool WriteGrowing(const at::Tensor& tensor, const ops::GrowingValue& value) {
  if (exec::ActiveGraphCapture() != nullptr) return false;
  exec::DeviceStorage* storage = StorageOf(tensor);
  const ir::DType dtype = ToDType(tensor.scalar_type());
  exec::GrowingLayout layout{value.padded.shape(), value.dim, value.length};
  if (value.padded.dtype() != dtype || !IsPlainWholeStorageOf(tensor, storage) ||
      !layout.Describes(SizesOf(tensor))) {
    return false;
  }
  const int64_t elements = layout.physical_elements();
  storage->WriteGrowing(ops::Reshape(value.padded, {elements}), std::move(layout));
  return true;
}

ir::Value HostScalarParameter(const at::Tensor& tensor, const ops::Scalar& value) {
  TORCH_CHECK(tensor.dim() == 0 && tensor.is_cpu(),
              "torch_tpu: expected a tpu tensor or a 0-d CPU tensor, got ", tensor.device());
  const at::ScalarType type = tensor.is_complex() ? at::kComplexFloat : tensor.scalar_type();
  return ScalarParameter(value, ToDType(type));
}

ir::Value ReadTensor(const at::Tensor& tensor) {
  if (!tensor.is_privateuseone()) return HostScalarParameter(tensor, CpuScalarValue(tensor));
  const ir::DType dtype = ToDType(tensor.scalar_type());
  exec::DeviceStorage* storage = StorageOf(tensor);
  ir::Shape sizes = SizesOf(tensor);
  std::vector<int64_t> strides(tensor.strides().begin(), tensor.strides().end());
  int64_t storage_offset = tensor.storage_offset();
  int64_t elements = 0;
  ir::Value value;
  const exec::GrowingLayout* layout = storage->growing();
  if (storage->padded() && !layout->logical_prefix() && storage->element_type() == dtype &&
      layout->MapView(sizes, strides, storage_offset)) {
    // A view within rows of a padded tensor (a column of a batch of ids) reads the padded array
    // directly: its program depends on the bucket, not on the length.
    value = storage->Read(dtype);
    elements = layout->physical_elements();
  } else {
    value = ReadStorage(storage, dtype, &elements);
  }
  ir::Value offset;
  if (!ops::CoversWholeStorage(elements, sizes, strides)) {
    ops::Scalar s;
    s.i = storage_offset;
    offset = ScalarParameter(s, ir::DType::kS64);
  }
  return ops::ReadView(value, dtype, sizes, strides, offset);
}

void WriteTensor(const at::Tensor& tensor, const ir::Value& value) {
  const ir::DType dtype = ToDType(tensor.scalar_type());
  exec::DeviceStorage* storage = StorageOf(tensor);
  ir::Shape sizes = SizesOf(tensor);
  std::vector<int64_t> strides(tensor.strides().begin(), tensor.strides().end());
  ir::Value update = ops::Convert(value, dtype);
  if (update.shape() != sizes) update = ops::BroadcastTo(update, sizes);
  const int64_t elements = storage->elements(dtype);
  if (elements == 0 || tensor.numel() == 0) return;
  const bool whole = ops::CoversWholeStorage(elements, sizes, strides);
  ir::DType storage_dtype = storage->initialized() ? storage->element_type() : dtype;
  if (whole && storage_dtype == dtype) {
    // The old value is dead: not read, so a fresh output (most ops') records no zeros for it.
    storage->Write(ops::Reshape(update, {elements}));
    return;
  }
  ir::Value offset;
  if (!whole) {
    ops::Scalar s;
    s.i = tensor.storage_offset();
    offset = ScalarParameter(s, ir::DType::kS64);
  }
  int64_t storage_elements = 0;
  storage->Write(ops::WriteView(ReadStorage(storage, storage_dtype, &storage_elements), update,
                                sizes, strides, offset));
}

void StartRecording() { exec::CutAtBackwardBoundary(torch::autograd::get_current_graph_task_id()); }

void CutAtScopeBoundary(const char* reason) {
  Translate([&] { exec::CutAtScopeBoundary(reason); });
}

void FinishWrites(const std::vector<exec::DeviceStorage*>& storages) {
  Translate([&] {
    if (exec::Deferring()) {
      for (exec::DeviceStorage* storage : storages) exec::RegisterPending(storage);
      if (exec::PendingOpOverSizeBound()) {
        exec::MaterializeAllPending("size limit", /*within_loop=*/true);
      }
      if (exec::PendingAtLoopBoundary()) exec::MaterializeAllPending("loop boundary");
      return;
    }
    exec::Materialize(storages, "op");
  });
}

void SyncForHostRead(exec::DeviceStorage* storage) {
  Translate([&] { exec::MaterializeForRead(storage, "host read"); });
}

at::Tensor EmptyTpu(c10::IntArrayRef sizes, c10::IntArrayRef strides, at::ScalarType dtype,
                    c10::DeviceIndex device) {
  CheckDeviceIndex(device);
  const c10::DeviceIndex saved = CurrentDeviceIndex();
  SetCurrentDeviceIndex(device);
  at::Tensor result = at::detail::empty_strided_generic(
      sizes, strides, GetTpuAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
  SetCurrentDeviceIndex(saved);
  return result;
}

at::Tensor EmptyTpuContiguous(c10::IntArrayRef sizes, at::ScalarType dtype,
                              c10::DeviceIndex device) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * std::max<int64_t>(sizes[i + 1], 1);
  }
  return EmptyTpu(sizes, strides, dtype, device);
}

void GrowStorage(const c10::Storage& storage, size_t nbytes) {
  if (nbytes <= storage.nbytes()) return;
  exec::DeviceStorage* old_storage = StorageOf(storage);
  const c10::DeviceIndex saved = CurrentDeviceIndex();
  SetCurrentDeviceIndex(static_cast<c10::DeviceIndex>(old_storage->device()));
  c10::DataPtr data = GetTpuAllocator()->allocate(nbytes);
  SetCurrentDeviceIndex(saved);
  auto* new_storage = static_cast<exec::DeviceStorage*>(data.get_context());
  if (old_storage->initialized() && old_storage->nbytes() > 0) {
    const ir::DType type = old_storage->element_type();
    SyncForHostRead(old_storage);
    int64_t old_elements = 0;
    ir::Value old_value = ReadStorage(old_storage, type, &old_elements);
    if (old_elements != old_storage->elements(type)) {
      old_value = ops::SliceAxis(old_value, 0, 0, old_storage->elements(type));
    }
    const int64_t grow = new_storage->elements(type) - old_storage->elements(type);
    new_storage->Write(ops::Pad(old_value, ops::Constant(0, type), {0}, {grow}, {0}));
    Translate([&] { exec::Materialize({new_storage}, "resize"); });
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(data));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

void ResizeTpu(const at::Tensor& tensor, c10::IntArrayRef sizes,
               std::optional<c10::IntArrayRef> strides) {
  auto* impl = tensor.unsafeGetTensorImpl();
  if (strides) {
    impl->set_sizes_and_strides(sizes, *strides);
  } else {
    impl->set_sizes_contiguous(sizes);
  }
  if (tensor.numel() == 0) return;
  const size_t needed = at::detail::computeStorageNbytes(
      tensor.sizes(), tensor.strides(), tensor.itemsize(), tensor.storage_offset());
  GrowStorage(tensor.storage(), needed);
}

namespace {

bool IsWholeContiguousStorage(const at::Tensor& tensor) {
  exec::DeviceStorage* storage = StorageOf(tensor);
  const ir::DType dtype = ToDType(tensor.scalar_type());
  return (!storage->initialized() || storage->element_type() == dtype) && !storage->padded() &&
         IsWholeStorageOf(tensor, storage);
}

// Copies a contiguous host tensor into a new device buffer of shape `dims`: a transfer to the
// device, in metrics and in profiles.
std::shared_ptr<runtime::Buffer> Upload(const at::Tensor& host, ir::DType dtype,
                                        const std::vector<int64_t>& dims, int device_index) {
  auto& metrics = exec::GetMetrics();
  metrics.transfers_to_device++;
  metrics.bytes_to_device += static_cast<int64_t>(host.nbytes());
  exec::ProfiledScope profiled(exec::ActivityKind::kTransferToDevice, device_index);
  if (profiled.active()) {
    profiled.activity().name = "copy host to tpu";
    profiled.activity().bytes = static_cast<int64_t>(host.nbytes());
  }
  return exec::GetClient().BufferFromHost(host.data_ptr(), exec::ToElementType(dtype), dims,
                                          exec::GetDevice(device_index));
}

}  // namespace

void CopyHostToTpu(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  at::Tensor host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  StartRecording();
  const ir::DType dtype = ToDType(dst.scalar_type());
  exec::DeviceStorage* storage = StorageOf(dst);
  Translate([&] {
    std::vector<int64_t> dims(host.sizes().begin(), host.sizes().end());
    if (IsWholeContiguousStorage(dst)) {
      storage->SetBuffer(Upload(host, dtype, {host.numel()}, storage->device()), dtype);
      return;
    }
    auto buffer = Upload(host, dtype, dims, storage->device());
    WriteTensor(dst, ir::MakeBufferParameter(buffer, ir::TensorType{dtype, dims}));
    FinishWrites({storage});
  });
}

void CopyTpuToHost(const at::Tensor& dst, const at::Tensor& src) {
  if (src.numel() == 0) return;
  at::Tensor source = src;
  if (!IsWholeContiguousStorage(src)) {
    // Compact the view on the device first so only its elements cross to the host.
    source = EmptyTpuContiguous(src.sizes(), src.scalar_type(), src.device().index());
    WriteTensor(source, ReadTensor(src));
    FinishWrites({StorageOf(source)});
  }
  exec::DeviceStorage* storage = StorageOf(source);
  if (!storage->initialized()) {
    dst.zero_();  // never written: an unwritten storage reads as zeros
    return;
  }
  SyncForHostRead(storage);
  at::Tensor host = at::empty(source.sizes(), source.options().device(c10::kCPU));
  Translate([&] { exec::CopyToHost(*storage, host.data_ptr(), host.nbytes()); });
  RaiseFailedDeviceChecks();  // a host read is where CUDA reports a device-side assert
  dst.copy_(host);
}

void CopyTpuToTpu(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  StartRecording();
  at::Tensor source = src;
  if (src.device() != dst.device()) {
    at::Tensor compact = src;
    if (!IsWholeContiguousStorage(src)) {
      compact = EmptyTpuContiguous(src.sizes(), src.scalar_type(), src.device().index());
      WriteTensor(compact, ReadTensor(src));
      FinishWrites({StorageOf(compact)});
    }
    exec::DeviceStorage* from = StorageOf(compact);
    SyncForHostRead(from);
    source =
        EmptyTpu(compact.sizes(), compact.strides(), compact.scalar_type(), dst.device().index());
    // A never-written source stays unwritten on the destination device (it reads as zeros).
    if (from->initialized()) {
      Translate([&] {
        auto copied = from->buffer()->CopyToDevice(exec::GetDevice(dst.device().index()));
        StorageOf(source)->SetBuffer(std::move(copied), from->element_type());
      });
    }
  }
  Translate([&] {
    // A grown source (a mask being built from a grown one) gives its copy the same layout.
    ops::GrowingValue grown =
        src.device() == dst.device() ? ReadGrowing(source) : ops::GrowingValue{};
    if (grown) grown.padded = ops::Convert(grown.padded, ToDType(dst.scalar_type()));
    if (!grown || !WriteGrowing(dst, grown)) WriteTensor(dst, ReadTensor(source));
    FinishWrites({StorageOf(dst)});
  });
}

void RethrowTranslated() {
  try {
    throw;
  } catch (const runtime::PjrtError& e) {
    if (e.is_resource_exhausted())
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory: ", e.what());
    TORCH_CHECK(false, e.what());
  } catch (const ops::UnsupportedError& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
}

}  // namespace torch_tpu::aten
