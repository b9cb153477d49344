// Device storages and materialization. A storage's value is a PJRT buffer (a dense 1-D array of
// its element type), a pending graph value, or nothing yet (reads as zeros).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exec/bucketing.h"
#include "ir/graph.h"
#include "runtime/pjrt.h"

namespace torch_tpu::exec {

runtime::ElementType ToElementType(ir::DType dtype);

// Threads share storages: in fused mode one thread's cut runs the values that other threads
// recorded, and installs them while those threads record, read or free the same storages. Each
// access to a storage's value holds this lock, and a cut of the pending set holds it throughout.
// Nothing under it takes the GIL: op recording (meta kernels, source lines) runs outside it.
std::unique_lock<std::recursive_mutex> LockStorages();

class DeviceStorage {
 public:
  DeviceStorage(size_t nbytes, int device);
  ~DeviceStorage();
  DeviceStorage(const DeviceStorage&) = delete;
  DeviceStorage& operator=(const DeviceStorage&) = delete;

  size_t nbytes() const { return nbytes_; }
  int device() const { return device_; }
  bool initialized() const { return has_type_; }
  ir::DType element_type() const { return element_type_; }
  int64_t elements(ir::DType dtype) const {
    return static_cast<int64_t>(nbytes_ / ir::ByteSize(dtype));
  }
  bool pending() const { return static_cast<bool>(pending_); }
  // Position in the pending set (exec/pending.h), 0 when not in it.
  uint64_t pending_sequence() const { return pending_sequence_; }
  void set_pending_sequence(uint64_t sequence) { pending_sequence_ = sequence; }

  // The storage's 1-D value for use inside a program; never null. With a padded growing layout
  // it is the padded array (growing()), longer than elements().
  ir::Value Read(ir::DType reader_dtype);
  // Sets a new pending 1-D value (the element type becomes fixed on the first write). A value of
  // another length than the growing layout's ends that layout.
  void Write(const ir::Value& value);
  // Sets a new pending value laid out as `layout` describes (exec/bucketing.h).
  void WriteGrowing(const ir::Value& value, GrowingLayout layout);
  // The layout of a storage grown by appending, or null.
  const GrowingLayout* growing() const { return growing_ ? &*growing_ : nullptr; }
  // Whether the value is longer than the storage (a padded growing layout).
  bool padded() const { return growing_ && growing_->padded(); }
  // Installs a materialized buffer of exactly the storage's size (uploads, cross-device copies,
  // compiled-graph results).
  void SetBuffer(std::shared_ptr<runtime::Buffer> buffer, ir::DType element_type);
  // The materialized buffer; call Materialize first if pending.
  const std::shared_ptr<runtime::Buffer>& buffer() const { return buffer_; }
  // Whether only this storage (and its cached parameter node) holds its buffer, so a program may
  // take it over (donation).
  bool OwnsBufferAlone() const { return buffer_ && buffer_.use_count() == (parameter_ ? 2 : 1); }

 private:
  friend void Materialize(const std::vector<DeviceStorage*>& storages, const std::string& reason,
                          bool cut);
  size_t nbytes_;
  int device_;
  bool has_type_ = false;
  ir::DType element_type_ = ir::DType::kU8;
  std::shared_ptr<runtime::Buffer> buffer_;
  ir::Value parameter_;  // cached parameter node over buffer_
  ir::Value pending_;
  uint64_t pending_sequence_ = 0;
  std::optional<GrowingLayout> growing_;
  int64_t padding_bytes_ = 0;  // counted in the memory stats beyond nbytes_
  void SetGrowing(std::optional<GrowingLayout> layout);
  // The value's length in elements of its type: the growing layout's, or the storage's.
  int64_t value_elements() const {
    return growing_ ? growing_->physical_elements() : elements(element_type_);
  }
  void InstallBuffer(std::shared_ptr<runtime::Buffer> buffer, ir::DType element_type);
};

// Runs the pending values of `storages` as one program (donating buffers nothing else needs).
// `cut`: the storages are a cut of the pending set, whose recompiles are watched (volatility.h).
void Materialize(const std::vector<DeviceStorage*>& storages, const std::string& reason,
                 bool cut = false);
// Makes a storage's value a buffer before it is read outside a program (a host read, a
// collective): a storage in the pending set is cut with everything recorded before it.
void MaterializeForRead(DeviceStorage* storage, const std::string& reason);
// Compiles (or finds in the cache) and launches `program`, donating the arguments marked in
// `donated`; a failure is a PjrtError naming the file the program was written to. `reason`: why
// it runs (a sync reason), for the profiler.
std::vector<std::shared_ptr<runtime::Buffer>> RunProgram(const ir::Program& program,
                                                         const std::vector<bool>& donated,
                                                         int device_index,
                                                         const std::string& reason);
// The buffer a buffer parameter binds (the execution layer owns the buffers of the IR's nodes).
inline runtime::Buffer* ParameterBuffer(const ir::Node* parameter) {
  return const_cast<runtime::Buffer*>(static_cast<const runtime::Buffer*>(parameter->buffer.get()));
}
// Registers a launched program with synchronize() (debug mode: waits for it).
void NoteLaunched(const std::vector<std::shared_ptr<runtime::Buffer>>& outputs);
// Waits for every execution launched so far (torch.tpu.synchronize); raises its errors.
void AwaitExecutions();
// The completion events of the executions that may still be running (what an event recorded now
// waits for), whether or not anything still holds their outputs.
std::vector<std::shared_ptr<runtime::Event>> InFlightExecutions();

// Copies a materialized storage's bytes to host memory.
void CopyToHost(DeviceStorage& storage, void* dst, size_t nbytes);
// Runs a standalone program over the given parameters (used by tests and tools).
std::vector<std::shared_ptr<runtime::Buffer>> RunProgramText(const std::string& text, int device);

}  // namespace torch_tpu::exec
