#include "exec/pending.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "exec/context.h"
#include "exec/storage.h"
#include "ir/graph.h"

namespace torch_tpu::exec {

namespace {

// Loop boundaries in fused mode: the ops recorded since the last cut as a polynomial hash of each
// op's structural hash (the op and its dtypes, not its dims), so any two runs of ops compare in
// O(1). A repeat is proposed by the distance back to the last occurrence of the latest few ops,
// raised to a multiple of at least the shortest body, and confirmed when the last two runs of
// that length are equal. The cut then comes at once (the ops before the loop go with it), and
// after each further run with the body's hash.
struct LoopDetector {
  static constexpr uint64_t kBase = 0x100000001b3ULL;
  static constexpr size_t kGram = 8;              // ops that propose a repeat together
  std::vector<uint64_t> prefix{0};                // prefix[i]: the hash of the first i ops
  std::vector<uint64_t> power{1};                 // kBase^i
  std::unordered_map<uint64_t, size_t> gram_end;  // each kGram-op run's latest end
  size_t checked = 0;                             // the op count at the last boundary check
  size_t period = 0;  // a loop body's length in ops, 0 while none is known
  uint64_t body = 0;  // its hash

  // The hash of ops [begin, end).
  uint64_t Segment(size_t begin, size_t end) const {
    return prefix[end] - prefix[begin] * power[end - begin];
  }
  void Restart() {
    prefix.resize(1);
    gram_end.clear();
    checked = 0;
  }
};

struct PendingSet {
  std::mutex mutex;
  uint64_t next_sequence = 1;
  std::map<uint64_t, DeviceStorage*> storages;  // by first-write sequence
  size_t bytes = 0;
  uint64_t ops_since_cut = 0;  // ops recorded since the first pending value
  int64_t backward_pass = -1;  // the autograd graph task the latest op recorded in, or -1
  LoopDetector loop;
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
// their inputs' buffers alive. The bound counts ops, not IR nodes: how many nodes an op adds
// depends on history (a value read once in a program is not read again), so a node bound cut a
// repeated step at places that kept moving, and each new place compiled again.
const uint64_t kMaxPendingOps = static_cast<uint64_t>(EnvLimit("TORCH_TPU_FUSE_MAX_OPS", 1000));
const size_t kMaxPendingBytes =
    static_cast<size_t>(EnvLimit("TORCH_TPU_FUSE_MAX_BYTES", int64_t{4} << 30));
// The shortest loop body cut at: shorter repeats (a chain of the same few ops) fuse whole.
const size_t kMinLoopOps = static_cast<size_t>(EnvLimit("TORCH_TPU_FUSE_MIN_LOOP_OPS", 128));

}  // namespace

bool Deferring() { return g_scope_depth > 0 || CurrentMode() == Mode::kDeferAndFuse; }

void RegisterPending(DeviceStorage* storage) {
  const auto storage_lock = LockStorages();  // another thread's cut may be running its value
  if (!storage->pending()) return;
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  if (storage->pending_sequence() != 0) return;
  // The op bound counts from the first pending value: strict ops before it (which ran as their
  // own programs) are not part of the next cut.
  if (set.storages.empty()) set.ops_since_cut = 0;
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

bool DetectingLoops() { return g_scope_depth == 0 && CurrentMode() == Mode::kDeferAndFuse; }

void NoteRecordedOp(uint64_t structural_hash) {
  if (!DetectingLoops()) return;
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  LoopDetector& loop = set.loop;
  // Odd, so an op never hashes to nothing.
  loop.prefix.push_back(loop.prefix.back() * LoopDetector::kBase + (structural_hash | 1));
  if (loop.power.size() < loop.prefix.size()) {
    loop.power.push_back(loop.power.back() * LoopDetector::kBase);
  }
}

bool PendingAtLoopBoundary() {
  if (!DetectingLoops()) return false;
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  LoopDetector& loop = set.loop;
  const size_t n = loop.prefix.size() - 1;
  // Writes that are not ops of their own (copies) check again at the same count: nothing new.
  if (n == loop.checked) return false;
  loop.checked = n;
  if (loop.period != 0) {
    if (n < loop.period) return false;
    if (n == loop.period && loop.prefix[n] == loop.body) return true;
    loop.period = 0;  // the loop ended or changed: look for the next one
  }
  if (n < LoopDetector::kGram) return false;
  const uint64_t gram = loop.Segment(n - LoopDetector::kGram, n);
  auto [seen, first_time] = loop.gram_end.emplace(gram, n);
  if (first_time) return false;
  const size_t repeat = n - seen->second;
  seen->second = n;
  const size_t period = repeat * ((kMinLoopOps + repeat - 1) / repeat);
  if (n < 2 * period || loop.Segment(n - 2 * period, n - period) != loop.Segment(n - period, n)) {
    return false;
  }
  loop.period = period;
  loop.body = loop.Segment(n - period, n);
  return true;
}

void CutAtBackwardBoundary(int64_t backward_pass) {
  if (!DetectingLoops()) return;
  {
    PendingSet& set = Pending();
    std::lock_guard<std::mutex> lock(set.mutex);
    const bool boundary = !set.storages.empty() && set.backward_pass != backward_pass;
    set.backward_pass = backward_pass;
    if (!boundary) return;
  }
  MaterializeAllPending("backward boundary");
}

void CutAtScopeBoundary(const std::string& reason) {
  if (DetectingLoops()) MaterializeAllPending(reason);
}

bool InDeferredScope() { return g_scope_depth > 0; }

bool PendingOpOverSizeBound() {
  PendingSet& set = Pending();
  std::lock_guard<std::mutex> lock(set.mutex);
  return ++set.ops_since_cut > kMaxPendingOps || set.bytes > kMaxPendingBytes;
}

void MaterializeAllPending(const std::string& reason, bool within_loop) {
  // Held until every value is installed: other threads may free these storages meanwhile.
  const auto storage_lock = LockStorages();
  std::vector<DeviceStorage*> storages;
  {
    PendingSet& set = Pending();
    std::lock_guard<std::mutex> lock(set.mutex);
    set.ops_since_cut = 0;
    if (!within_loop) set.loop.Restart();
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
