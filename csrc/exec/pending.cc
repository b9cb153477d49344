#include "exec/pending.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "exec/context.h"
#include "exec/storage.h"
#include "ir/graph.h"

namespace torch_tpu::exec {

namespace {

struct PendingSet {
  std::mutex mutex;
  uint64_t next_sequence = 1;
  std::map<uint64_t, DeviceStorage*> storages;  // by first-write sequence
  size_t bytes = 0;
  uint64_t nodes_at_last_cut = 0;
};

PendingSet& Pending() {
  static PendingSet* set = new PendingSet();
  return *set;
}

thread_local int g_scope_depth = 0;

int64_t EnvLimit(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoll(value) : fallback;
}

// A cut is forced past these: compile time grows with program size, and pending values hold
// their inputs' buffers alive.
const uint64_t kMaxPendingNodes =
    static_cast<uint64_t>(EnvLimit("TORCH_TPU_FUSE_MAX_NODES", 20000));
const size_t kMaxPendingBytes =
    static_cast<size_t>(EnvLimit("TORCH_TPU_FUSE_MAX_BYTES", int64_t{4} << 30));

}  // namespace

bool Deferring() { return g_scope_depth > 0 || CurrentMode() == Mode::kDeferAndFuse; }

void RegisterPending(DeviceStorage* storage) {
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  if (storage->pending_sequence() != 0) return;
  // The node bound counts from the first pending value: nodes recorded by strict ops before it
  // (which ran as their own programs) are not part of the next cut.
  if (set.storages.empty()) set.nodes_at_last_cut = ir::RecordedNodeCount();
  const uint64_t sequence = set.next_sequence++;
  storage->set_pending_sequence(sequence);
  set.storages.emplace(sequence, storage);
  set.bytes += storage->nbytes();
}

void ForgetPending(DeviceStorage* storage) {
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  if (set.storages.erase(storage->pending_sequence()) > 0) set.bytes -= storage->nbytes();
  storage->set_pending_sequence(0);
}

size_t PendingCount() {
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  return set.storages.size();
}

bool PendingOverSizeBound() {
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  return ir::RecordedNodeCount() - set.nodes_at_last_cut > kMaxPendingNodes ||
         set.bytes > kMaxPendingBytes;
}

void MaterializeAllPending(const std::string& reason) {
  std::vector<DeviceStorage*> storages;
  {
    PendingSet& set = Pending();
    std::lock_guard<std::mutex> lock(set.mutex);
    set.nodes_at_last_cut = ir::RecordedNodeCount();
    if (set.storages.empty()) return;
    for (auto& [sequence, storage] : set.storages) {
      storage->set_pending_sequence(0);
      storages.push_back(storage);
    }
    set.storages.clear();
    set.bytes = 0;
  }
  // One program per device, each in creation order.
  std::map<int, std::vector<DeviceStorage*>> by_device;
  for (DeviceStorage* storage : storages) by_device[storage->device()].push_back(storage);
  for (auto& [device, group] : by_device) Materialize(group, reason, /*cut=*/true);
}

DeferredScope::DeferredScope() { ++g_scope_depth; }

DeferredScope::~DeferredScope() {
  if (open_) --g_scope_depth;
}

void DeferredScope::Close(const std::string& reason) {
  if (!open_) return;
  open_ = false;
  if (--g_scope_depth == 0 && CurrentMode() != Mode::kDeferAndFuse) MaterializeAllPending(reason);
}

}  // namespace torch_tpu::exec
