#include "exec/storage.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "exec/compile_cache.h"
#include "exec/context.h"
#include "exec/graph_plan.h"
#include "exec/graph_release.h"
#include "exec/pending.h"
#include "exec/profile.h"
#include "exec/replay.h"
#include "exec/scalar_upload.h"
#include "exec/volatility.h"
#include "runtime/buffer_release.h"

namespace torch_tpu::exec {

std::unique_lock<std::recursive_mutex> LockStorages() {
  static auto* mutex = new std::recursive_mutex();  // leaked: storages die at exit too
  return std::unique_lock<std::recursive_mutex>(*mutex);
}

runtime::ElementType ToElementType(ir::DType dtype) {
  using E = runtime::ElementType;
  switch (dtype) {
    case ir::DType::kBool:
      return E::kPred;
    case ir::DType::kS8:
      return E::kS8;
    case ir::DType::kS16:
      return E::kS16;
    case ir::DType::kS32:
      return E::kS32;
    case ir::DType::kS64:
      return E::kS64;
    case ir::DType::kU8:
      return E::kU8;
    case ir::DType::kU16:
      return E::kU16;
    case ir::DType::kU32:
      return E::kU32;
    case ir::DType::kU64:
      return E::kU64;
    case ir::DType::kF16:
      return E::kF16;
    case ir::DType::kBF16:
      return E::kBF16;
    case ir::DType::kF32:
      return E::kF32;
    case ir::DType::kF64:
      return E::kF64;
    case ir::DType::kC64:
      return E::kC64;
  }
  return E::kInvalid;
}

DeviceStorage::DeviceStorage(size_t nbytes, int device) : nbytes_(nbytes), device_(device) {
  GetMemoryStats(device_).Add(static_cast<int64_t>(nbytes_));
}

DeviceStorage::~DeviceStorage() {
  // Waits for a cut that holds this storage (another thread's) to install its value.
  const auto lock = LockStorages();
  GetMemoryStats(device_).Remove(static_cast<int64_t>(nbytes_) + padding_bytes_);
  if (pending_sequence_ != 0) ForgetPending(this);
}

ir::Value DeviceStorage::Read(ir::DType reader_dtype) {
  const auto lock = LockStorages();
  if (pending_) return pending_;
  if (!has_type_) {
    return ir::Full(0, ir::TensorType{reader_dtype, {elements(reader_dtype)}});
  }
  if (!parameter_) {
    parameter_ =
        ir::MakeBufferParameter(buffer_, ir::TensorType{element_type_, {value_elements()}});
  }
  return parameter_;
}

void DeviceStorage::Write(const ir::Value& value) {
  const auto lock = LockStorages();
  if (!has_type_) {
    has_type_ = true;
    element_type_ = value.dtype();
  }
  if (growing_ &&
      (value.dtype() != element_type_ || value.shape()[0] != growing_->physical_elements())) {
    SetGrowing(std::nullopt);
  }
  pending_ = value;
}

void DeviceStorage::WriteGrowing(const ir::Value& value, GrowingLayout layout) {
  const auto lock = LockStorages();
  has_type_ = true;
  element_type_ = value.dtype();
  SetGrowing(std::move(layout));
  pending_ = value;
}

// The padding counts in the memory stats as what it is: device memory this storage holds.
void DeviceStorage::SetGrowing(std::optional<GrowingLayout> layout) {
  growing_ = std::move(layout);
  const int64_t padding = growing_ ? (growing_->physical_elements() - elements(element_type_)) *
                                         static_cast<int64_t>(ir::ByteSize(element_type_))
                                   : 0;
  auto& stats = GetMemoryStats(device_);
  stats.Add(padding);
  stats.Remove(padding_bytes_);
  padding_bytes_ = padding;
}

void DeviceStorage::SetBuffer(std::shared_ptr<runtime::Buffer> buffer, ir::DType element_type) {
  const auto lock = LockStorages();
  if (growing_) SetGrowing(std::nullopt);
  InstallBuffer(std::move(buffer), element_type);
}

void DeviceStorage::InstallBuffer(std::shared_ptr<runtime::Buffer> buffer, ir::DType element_type) {
  // The new buffer is counted before the old one is released, so a copy shows in the peak;
  // a donated buffer was already released (the memory is reused).
  auto& stats = GetMemoryStats(device_);
  if (buffer_ && !buffer_->donated()) {
    stats.Add(static_cast<int64_t>(nbytes_));
    stats.Remove(static_cast<int64_t>(nbytes_));
  }
  buffer_ = std::move(buffer);
  has_type_ = true;
  element_type_ = element_type;
  parameter_ = {};
  pending_ = {};
}

namespace {
// Executions that may still be running, as their completion events (the ready event of one
// output: an execution's outputs are all defined when it finishes): synchronize() and events wait
// on them. Not the outputs themselves, which would keep results nobody holds alive, and which
// once freed left nothing to wait for: `model(x); torch.tpu.synchronize()` returned while the
// program still ran, as did an event recorded after it.
struct InFlight {
  std::mutex mutex;
  std::vector<std::shared_ptr<runtime::Event>> executions;
  size_t trim_at = 1024;
};
InFlight& InFlightExecutionList() {
  static InFlight* in_flight = new InFlight();
  return *in_flight;
}
void TrackInFlight(const std::vector<std::shared_ptr<runtime::Buffer>>& outputs) {
  if (outputs.empty()) return;
  std::shared_ptr<runtime::Event> done = outputs.front()->ReadyEvent();
  InFlight& in_flight = InFlightExecutionList();
  std::lock_guard<std::mutex> lock(in_flight.mutex);
  // A loop that never waits drops the finished ones now and then; the threshold doubles past
  // what is still running, so the scans stay amortized over the pushes.
  if (in_flight.executions.size() >= in_flight.trim_at) {
    std::erase_if(in_flight.executions, [](const auto& event) { return event->IsReady(); });
    in_flight.trim_at = std::max<size_t>(1024, 2 * in_flight.executions.size());
  }
  in_flight.executions.push_back(std::move(done));
}
}  // namespace

void NoteLaunched(const std::vector<std::shared_ptr<runtime::Buffer>>& outputs) {
  if (CurrentMode() != Mode::kDebug) {
    TrackInFlight(outputs);
    return;
  }
  for (const auto& output : outputs) {
    try {
      output->AwaitReady();
    } catch (const runtime::PjrtError& e) {
      throw runtime::PjrtError(e.code(), e.what());
    }
  }
}

std::vector<std::shared_ptr<runtime::Buffer>> RunProgram(const ir::Program& program,
                                                         const std::vector<bool>& donated,
                                                         int device_index,
                                                         const std::string& reason) {
  const runtime::Device& device = GetDevice(device_index);
  const ir::Signature signature = ir::ComputeSignature(program, 0);
  auto executable = GetExecutableFor(signature, [&] { return ir::PrintProgram(program); }, device);
  std::vector<std::shared_ptr<runtime::Buffer>> uploads;
  std::vector<PJRT_Buffer*> arguments;
  for (const ir::Node* parameter : program.parameters) {
    arguments.push_back(ParameterBuffer(parameter)->raw());
  }
  for (const ir::ScalarPack& pack : program.scalar_packs) {
    uploads.push_back(UploadScalarPack(pack, device));
    arguments.push_back(uploads.back()->raw());
  }
  try {
    auto outputs = ExecuteProfiled(*executable, arguments, donated, device, signature,
                                   program.nodes.size(), reason);
    // Runs of an executable are awaited until one completes cleanly: a program that compiles but
    // fails at run time (an op the plugin cannot execute) then fails here, where its program and
    // ops are known, and not at some later read with the plugin's message alone. A first run
    // follows a compile or a disk load, which costs far more than the wait.
    if (!executable->ran_cleanly()) {
      for (const auto& output : outputs) output->AwaitReady();
      executable->MarkRanCleanly();
    }
    return outputs;
  } catch (const runtime::PjrtError& e) {
    const std::string dump = DumpProgram(signature, ir::PrintProgram(program));
    throw runtime::PjrtError(
        e.code(), std::string(e.what()) + "\nThe StableHLO program was written to " + dump);
  }
}

void Materialize(const std::vector<DeviceStorage*>& storages, const std::string& reason, bool cut) {
  auto lock = LockStorages();
  std::vector<DeviceStorage*> targets;
  std::vector<ir::Value> results;
  for (DeviceStorage* storage : storages) {
    if (storage == nullptr || !storage->pending_) continue;
    if (std::find(targets.begin(), targets.end(), storage) != targets.end()) continue;
    if (storage->parameter_ && storage->pending_.node == storage->parameter_.node) {
      storage->pending_ = {};  // written with its own value: nothing to run
      continue;
    }
    targets.push_back(storage);
    results.push_back(storage->pending_);
  }
  if (targets.empty()) return;
  GetMetrics().CountSync(reason);
  const int device_index = targets[0]->device_;

  ir::Program program = ir::BuildProgram(results);
  // Donate a storage's old buffer when only the storage and its parameter node still hold it.
  std::unordered_map<const void*, size_t> target_of_buffer;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r]->buffer_) target_of_buffer.emplace(targets[r]->buffer_.get(), r);
  }
  std::vector<bool> donated(program.parameters.size() + program.scalar_packs.size(), false);
  for (size_t p = 0; p < program.parameters.size(); ++p) {
    const ir::Node* parameter = program.parameters[p];
    auto found = target_of_buffer.find(parameter->buffer.get());
    if (found == target_of_buffer.end()) continue;
    const size_t r = found->second;
    if (targets[r]->buffer_.use_count() == 2 &&
        program.results[r].type() == parameter->results[0]) {
      program.aliased_result[p] = static_cast<int>(r);
      donated[p] = true;
    }
  }
  std::vector<std::shared_ptr<runtime::Buffer>> outputs;
  // A new executable for this process, compiled or loaded from the disk cache: both mean the cut
  // met a structure it had not run before (volatility.h counts them per site).
  auto executables_loaded = [] {
    return GetMetrics().compiles.load() + GetMetrics().disk_cache_hits.load();
  };
  const int64_t loaded_before = executables_loaded();
  // A strict op's own outputs need no lock while it compiles and launches; a cut's storages stay
  // locked by MaterializeAllPending, as other threads may free them.
  lock.unlock();
  try {
    outputs = RunProgram(program, donated, device_index, reason);
    // A cut that writes padded growing values recompiles when a bucket fills (bucketing.h), at
    // exponentially spaced steps: expected, not volatile.
    auto bucketed = [&] {
      return std::any_of(targets.begin(), targets.end(),
                         [](const DeviceStorage* target) { return target->padded(); });
    };
    // A torch.compile graph's new shapes are Dynamo's recompiles (guarded, counted and warned
    // about there), not a fused site that keeps changing.
    if (cut && reason != kCompiledGraphReason && executables_loaded() != loaded_before &&
        !bucketed()) {
      NoteCompiledCut(program);
    }
    if (GraphCapture* capture = ActiveGraphCapture()) capture->OnCut(program, targets);
  } catch (const runtime::PjrtError& e) {
    lock.lock();
    // A run that failed has still consumed the buffers donated to it: no replay reads them.
    for (size_t p = 0; p < program.parameters.size(); ++p) {
      if (donated[p]) ParameterBuffer(program.parameters[p])->MarkDonated();
    }
    // A program of several ops is replayed op by op to name the one that failed.
    const std::string culprit = FailingOrigin(program, device_index);
    if (culprit.empty()) throw;
    throw runtime::PjrtError(e.code(), std::string(e.what()) + "\nThe failing op: " + culprit);
  }
  lock.lock();
  Metrics& metrics = GetMetrics();
  metrics.executions++;
  if (reason == kCompiledGraphReason) metrics.compiled_graph_executions++;
  for (size_t p = 0; p < donated.size(); ++p) {
    if (!donated[p]) continue;
    ParameterBuffer(program.parameters[p])->MarkDonated();
    metrics.donated_buffers++;
  }
  program = ir::Program{};  // release graph references before installing results
  for (size_t r = 0; r < targets.size(); ++r) {
    targets[r]->InstallBuffer(outputs[r], results[r].dtype());
  }
  NoteLaunched(outputs);
  if (cut) RetireGraph(std::move(results));
}

void MaterializeForRead(DeviceStorage* storage, const std::string& reason) {
  const auto lock = LockStorages();
  if (!storage->pending()) return;
  if (storage->pending_sequence() != 0) {
    MaterializeAllPending(reason);
  } else {
    Materialize({storage}, reason);
  }
}

std::vector<std::shared_ptr<runtime::Event>> InFlightExecutions() {
  InFlight& in_flight = InFlightExecutionList();
  std::lock_guard<std::mutex> lock(in_flight.mutex);
  return in_flight.executions;
}

void AwaitExecutions() {
  std::vector<std::shared_ptr<runtime::Event>> executions;
  {
    InFlight& in_flight = InFlightExecutionList();
    std::lock_guard<std::mutex> lock(in_flight.mutex);
    executions.swap(in_flight.executions);
  }
  ReleaseRetiredGraphs();
  for (const auto& done : executions) done->Await();
  runtime::DestroyRetiredBuffers();  // nothing runs now, so destroying them waits for nothing
}

void CopyToHost(DeviceStorage& storage, void* dst, size_t nbytes) {
  std::shared_ptr<runtime::Buffer> buffer;
  {
    const auto lock = LockStorages();
    buffer = storage.buffer();
  }
  ReleaseRetiredGraphs();
  Metrics& metrics = GetMetrics();
  metrics.transfers_to_host++;
  metrics.bytes_to_host += static_cast<int64_t>(nbytes);
  ProfiledScope profiled(ActivityKind::kTransferToHost, storage.device());
  if (profiled.active()) {
    // A profile times the copy alone, not the wait for the program that computes the value.
    buffer->AwaitReady();
    profiled.activity().start_ns = ProfileClockNs();
    profiled.activity().name = "copy tpu to host";
    profiled.activity().bytes = static_cast<int64_t>(nbytes);
  }
  buffer->ToHost(dst, nbytes);
}

std::vector<std::shared_ptr<runtime::Buffer>> RunProgramText(const std::string& text, int device) {
  ir::Hasher h;
  h.Add(text);
  const ir::Signature signature = h.Finish();
  const runtime::Device& target = GetDevice(device);
  auto executable = GetExecutableFor(signature, [&] { return text; }, target);
  auto outputs = ExecuteProfiled(*executable, {}, {}, target, signature, 0, "stablehlo text");
  for (auto& output : outputs) output->AwaitReady();
  return outputs;
}

}  // namespace torch_tpu::exec
