// Bridges ATen tensors and the execution layer: allocator, storage access, reading and writing
// tensors as graph values, host transfers, and error translation.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include "exec/storage.h"
#include "ops/lowering.h"

namespace torch_tpu::aten {

c10::Allocator* GetTpuAllocator();
// The device whose allocator handed out `address` (a tpu data pointer), if any.
std::optional<c10::DeviceIndex> DeviceOfAddress(const void* address);
exec::DeviceStorage* StorageOf(const at::Tensor& tensor);
exec::DeviceStorage* StorageOf(const c10::Storage& storage);

// Throws a clear error for an out-of-range index.
void CheckDeviceIndex(c10::DeviceIndex index);
c10::DeviceIndex CurrentDeviceIndex();
void SetCurrentDeviceIndex(c10::DeviceIndex index);

ir::DType ToDType(at::ScalarType type);  // throws NotImplementedError for unsupported dtypes
bool IsSupportedDType(at::ScalarType type);

// A 0-d runtime parameter holding `scalar` as `dtype`.
ir::Value ScalarParameter(const ops::Scalar& scalar, ir::DType dtype);
ops::Scalar ToScalar(const c10::Scalar& scalar);

// The tensor's logical value (its view read). A 0-d CPU tensor becomes a scalar parameter.
ir::Value ReadTensor(const at::Tensor& tensor);
// The parameter a 0-d CPU tensor whose value is `value` becomes (ReadTensor's, without reading
// the value again).
ir::Value HostScalarParameter(const at::Tensor& tensor, const ops::Scalar& value);
// Writes `value` (the tensor's shape; converted to its dtype) through the tensor's view.
void WriteTensor(const at::Tensor& tensor, const ir::Value& value);
// A tensor that is the whole of a storage grown by appending, in its padded form
// (exec/bucketing.h); an empty value for any other tensor.
ops::GrowingValue ReadGrowing(const at::Tensor& tensor);
// Writes `value` as the new value of `tensor`'s storage, laid out padded, when the tensor is its
// whole storage, contiguous; false (nothing written) otherwise.
bool WriteGrowing(const at::Tensor& tensor, const ops::GrowingValue& value);
// Called before an op records: fused mode cuts the pending work at a backward pass's start and
// end (exec::CutAtBackwardBoundary).
void StartRecording();
// exec::CutAtScopeBoundary with its errors translated, for the scopes opened from Python (an
// optimizer step, a torch.compile graph).
void CutAtScopeBoundary(const char* reason);
// Runs (strict, debug) or defers (fused) the pending writes of `tensors`.
void FinishWrites(const std::vector<exec::DeviceStorage*>& storages);
// Makes the storage's buffer current before a host read.
void SyncForHostRead(exec::DeviceStorage* storage);

at::Tensor EmptyTpu(c10::IntArrayRef sizes, c10::IntArrayRef strides, at::ScalarType dtype,
                    c10::DeviceIndex device);
at::Tensor EmptyTpuContiguous(c10::IntArrayRef sizes, at::ScalarType dtype,
                              c10::DeviceIndex device);
// Grows the storage to `nbytes`, keeping its contents.
void GrowStorage(const c10::Storage& storage, size_t nbytes);
void ResizeTpu(const at::Tensor& tensor, c10::IntArrayRef sizes,
               std::optional<c10::IntArrayRef> strides);

void CopyHostToTpu(const at::Tensor& dst, const at::Tensor& src);
void CopyTpuToHost(const at::Tensor& dst, const at::Tensor& src);
void CopyTpuToTpu(const at::Tensor& dst, const at::Tensor& src);

// Runs `body`, turning runtime errors into PyTorch's (OutOfMemoryError, RuntimeError).
template <typename Body>
auto Translate(Body&& body) -> decltype(body());
[[noreturn]] void RethrowTranslated();

template <typename Body>
auto Translate(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    RethrowTranslated();
  }
}

}  // namespace torch_tpu::aten
