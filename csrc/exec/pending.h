// The pending set: storages whose values are still graph values, waiting for a cut. Fused eager
// mode keeps every write here until a sync point; a DeferredScope does the same for a batch of
// ops in any mode (a _foreach_* op, an optimizer step), so the batch becomes one program.
//
// Storages are kept in the order they were first written, so a cut's results come in creation
// order and recording the same work again gives the same program (and signature).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace torch_tpu::exec {

class DeviceStorage;

// Whether writes on this thread stay pending: fused eager mode, or inside a DeferredScope.
bool Deferring();
void RegisterPending(DeviceStorage* storage);  // a storage written with a pending value
void ForgetPending(DeviceStorage* storage);    // the storage is being destroyed
// Runs every pending storage's value, one program per device, results in creation order.
// `within_loop`: a cut for size, which the loop detector sees through. A training loop that never
// reads a pending value back is one continuous stream of ops; its size cuts fall at places that
// move from step to step until the detector finds the step and cuts at its boundaries, after
// which each size cut falls at the same place in every step.
void MaterializeAllPending(const std::string& reason, bool within_loop = false);
size_t PendingCount();
// Called before an op records, with the autograd backward pass recording it (its graph task id;
// -1 outside one): in fused mode, work pending from outside that pass is cut first. A training
// step's forward is then launched when its backward starts and runs while the backward is
// recorded, and the backward while the optimizer step is (the host and the device overlap, as
// in strict mode). The cuts fall at the same places in every step.
void CutAtBackwardBoundary(int64_t backward_pass);
// Called where a scope opened from Python begins or has closed (an optimizer step, a
// torch.compile graph): fused mode cuts there too, outside other scopes. A compiled graph is then
// its own program, which a plan can launch again (python/compiled_graph.cc), and the next
// step's forward is recorded while an optimizer step runs.
void CutAtScopeBoundary(const std::string& reason);
// Whether a DeferredScope is open on this thread.
bool InDeferredScope();
// Counts one more op recorded into the pending set; whether the pending work is now past the
// size bound (ops since the first pending value, or pending bytes).
bool PendingOpOverSizeBound();
// Fused mode's loop boundaries: each op recorded (outside deferred scopes) notes its structural
// hash (the op and dtypes, not dims); the pending work is at a boundary when it is two equal
// halves of at least TORCH_TPU_FUSE_MIN_LOOP_OPS ops each, or, once such a loop body is known,
// one more run of it.
bool DetectingLoops();  // fused mode, outside deferred scopes: only then is an op's hash needed
void NoteRecordedOp(uint64_t structural_hash);
bool PendingAtLoopBoundary();

// The reason a torch.compile graph's scope is closed with: its programs are counted apart.
inline constexpr const char* kCompiledGraphReason = "compiled graph";

// Writes stay pending while a scope is open on this thread; closing the outermost one runs them
// as one program unless fused mode keeps them pending anyway. Close() may throw (a failed
// program); a scope destroyed without Close() (an exception unwinding) leaves the work pending
// for the next sync point, which is still correct.
class DeferredScope {
 public:
  DeferredScope();
  ~DeferredScope();
  DeferredScope(const DeferredScope&) = delete;
  DeferredScope& operator=(const DeferredScope&) = delete;
  void Close(const std::string& reason);

 private:
  bool open_ = true;
};

}  // namespace torch_tpu::exec
