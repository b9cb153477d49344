// The device-activity recorder behind torch.profiler: program executions, compiles, disk-cache
// loads and host<->device transfers, with wall-clock times, while a profile is running. Knows
// nothing of torch or kineto (python/profiler.cc hands the activities to the profiler).
//
// Off, each recording site costs one relaxed atomic load (Profiling()).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/pjrt.h"

namespace torch_tpu::exec {

enum class ActivityKind { kExecution, kCompile, kCacheLoad, kTransferToDevice, kTransferToHost };

struct ProfiledActivity {
  ActivityKind kind = ActivityKind::kExecution;
  std::string name;
  int device = 0;
  int64_t start_ns = 0;  // nanoseconds since the Unix epoch (the profiler's clock)
  int64_t end_ns = 0;
  int64_t thread = 0;        // the OS thread that recorded it
  uint64_t correlation = 0;  // the host op that caused it (PushCorrelation), 0 when none
  std::string signature;     // executions, compiles and cache loads: the program's signature
  std::string reason;        // executions: why the program ran (a sync reason)
  int64_t ops = 0;           // executions: the program's top-level ops
  int64_t bytes = 0;         // transfers
};

extern std::atomic<bool> g_profiling;
inline bool Profiling() { return g_profiling.load(std::memory_order_relaxed); }

// Starts a recording (dropping anything left from an earlier one).
void StartProfiling();
// Stops recording and returns what was recorded, in recording order; waits for the executions
// still running so that each has its end time.
std::vector<ProfiledActivity> StopProfiling();

// The profiler's clock: nanoseconds since the Unix epoch.
int64_t ProfileClockNs();

// The host op running on this thread (the profiler's correlation id), stamped on what it records.
void PushCorrelation(uint64_t id);
void PopCorrelation();

// Records a finished activity (thread and correlation are filled in here).
void RecordActivity(ProfiledActivity activity);
// Launches `executable` on `device` (Executable::Execute), recorded as an execution when
// profiling: `signature` and `ops` (0: unknown) name the program, `reason` says why it runs. The
// execution ends when its first output is ready, which the plugin reports later: profiling does
// not make execution blocking.
std::vector<std::shared_ptr<runtime::Buffer>> ExecuteProfiled(
    runtime::Executable& executable, const std::vector<PJRT_Buffer*>& arguments,
    const std::vector<bool>& donated, const runtime::Device& device, const ir::Signature& signature,
    size_t ops, const std::string& reason);

// Times a scope and records it as one activity (when profiling was on at its start).
class ProfiledScope {
 public:
  ProfiledScope(ActivityKind kind, int device);
  ~ProfiledScope();
  ProfiledScope(const ProfiledScope&) = delete;
  ProfiledScope& operator=(const ProfiledScope&) = delete;
  bool active() const { return active_; }
  // Only for an active scope: what to record.
  ProfiledActivity& activity() { return activity_; }

 private:
  bool active_;
  ProfiledActivity activity_;
};

}  // namespace torch_tpu::exec
