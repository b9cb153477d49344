#include "exec/profile.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "exec/context.h"

namespace torch_tpu::exec {

std::atomic<bool> g_profiling{false};

namespace {

struct Recorder {
  std::mutex mutex;
  std::condition_variable executions_finished;
  std::vector<ProfiledActivity> activities;
  size_t running = 0;  // executions recorded whose end time has not arrived yet
  // One per recording and one after it (changed under the mutex): a late end time never lands in
  // a later recording, and a host op left open when a recording stopped is never stamped again.
  std::atomic<uint64_t> generation{0};
};

Recorder& GetRecorder() {
  static Recorder* recorder = new Recorder();  // leaked: plugin threads may call in at exit
  return *recorder;
}

struct Correlation {
  uint64_t id;
  uint64_t generation;
};
thread_local std::vector<Correlation> t_correlations;

int64_t CurrentThreadId() { return static_cast<int64_t>(::syscall(SYS_gettid)); }

// Stamps the recording thread and its host op.
void StampOrigin(ProfiledActivity& activity) {
  activity.thread = CurrentThreadId();
  const bool current = !t_correlations.empty() &&
                       t_correlations.back().generation == GetRecorder().generation.load();
  activity.correlation = current ? t_correlations.back().id : 0;
}

void FinishExecution(uint64_t generation, size_t index, int64_t end_ns) {
  Recorder& recorder = GetRecorder();
  std::lock_guard<std::mutex> lock(recorder.mutex);
  if (generation != recorder.generation) return;
  recorder.activities[index].end_ns = end_ns;
  if (--recorder.running == 0) recorder.executions_finished.notify_all();
}

// Records an execution whose end time arrives when `output` is ready.
void RecordExecution(ProfiledActivity execution, const std::shared_ptr<runtime::Buffer>& output) {
  StampOrigin(execution);
  Recorder& recorder = GetRecorder();
  uint64_t generation;
  size_t index;
  {
    std::lock_guard<std::mutex> lock(recorder.mutex);
    generation = recorder.generation.load();
    index = recorder.activities.size();
    recorder.activities.push_back(std::move(execution));
    recorder.running++;
  }
  if (output == nullptr) {
    FinishExecution(generation, index, ProfileClockNs());  // no output to wait for
    return;
  }
  try {
    output->OnReady([generation, index] { FinishExecution(generation, index, ProfileClockNs()); });
  } catch (const runtime::PjrtError&) {
    // The plugin cannot report readiness (no PJRT_Event_OnReady): the launch's end is the best
    // end time known.
    FinishExecution(generation, index, ProfileClockNs());
  }
}

// A device runs programs in launch order: an execution launched while earlier ones still ran
// starts when the last of them ends, so its span is its own run, not its wait in the queue. One
// that ends before an earlier one ran beside it and keeps its launch time.
void StartAfterEarlierExecutions(std::vector<ProfiledActivity>& activities) {
  std::vector<ProfiledActivity*> executions;
  for (ProfiledActivity& activity : activities) {
    if (activity.kind == ActivityKind::kExecution) executions.push_back(&activity);
  }
  std::stable_sort(executions.begin(), executions.end(),
                   [](const auto* a, const auto* b) { return a->start_ns < b->start_ns; });
  std::map<int, int64_t> device_free_ns;  // per device: when the executions so far ended
  for (ProfiledActivity* execution : executions) {
    int64_t& free_ns = device_free_ns[execution->device];
    if (free_ns > execution->start_ns && free_ns < execution->end_ns) execution->start_ns = free_ns;
    free_ns = std::max(free_ns, execution->end_ns);
  }
}

}  // namespace

int64_t ProfileClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void StartProfiling() {
  Recorder& recorder = GetRecorder();
  std::lock_guard<std::mutex> lock(recorder.mutex);
  recorder.activities.clear();
  recorder.running = 0;
  recorder.generation++;
  g_profiling.store(true);
}

std::vector<ProfiledActivity> StopProfiling() {
  g_profiling.store(false);
  Recorder& recorder = GetRecorder();
  std::unique_lock<std::mutex> lock(recorder.mutex);
  recorder.executions_finished.wait(lock, [&] { return recorder.running == 0; });
  recorder.generation++;
  std::vector<ProfiledActivity> recorded;
  recorded.swap(recorder.activities);
  StartAfterEarlierExecutions(recorded);
  return recorded;
}

void PushCorrelation(uint64_t id) {
  t_correlations.push_back(Correlation{id, GetRecorder().generation.load()});
}

void PopCorrelation() {
  if (!t_correlations.empty()) t_correlations.pop_back();
}

void RecordActivity(ProfiledActivity activity) {
  StampOrigin(activity);
  Recorder& recorder = GetRecorder();
  std::lock_guard<std::mutex> lock(recorder.mutex);
  recorder.activities.push_back(std::move(activity));
}

std::vector<std::shared_ptr<runtime::Buffer>> ExecuteProfiled(
    runtime::Executable& executable, const std::vector<PJRT_Buffer*>& arguments,
    const std::vector<bool>& donated, const runtime::Device& device, const ir::Signature& signature,
    size_t ops, const std::string& reason) {
  // Metrics count the host time of the plugin's execute call (the device runs asynchronously),
  // whatever launched it: a strict op, a fused cut or a compiled graph's plan.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<runtime::Buffer>> outputs;
  if (!Profiling()) {
    outputs = executable.Execute(arguments, donated, device);
  } else {
    ProfiledActivity execution;
    execution.kind = ActivityKind::kExecution;
    execution.signature = signature.ToHex();
    execution.ops = static_cast<int64_t>(ops);
    execution.name = "program " + execution.signature.substr(0, 8);
    if (ops > 0) execution.name += " (" + std::to_string(ops) + (ops == 1 ? " op)" : " ops)");
    execution.reason = reason;
    execution.device = device.index();
    execution.start_ns = ProfileClockNs();
    outputs = executable.Execute(arguments, donated, device);
    RecordExecution(std::move(execution), outputs.empty() ? nullptr : outputs[0]);
  }
  GetMetrics().execute_time_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return outputs;
}

ProfiledScope::ProfiledScope(ActivityKind kind, int device) : active_(Profiling()) {
  if (!active_) return;
  activity_.kind = kind;
  activity_.device = device;
  activity_.start_ns = ProfileClockNs();
}

ProfiledScope::~ProfiledScope() {
  if (!active_) return;
  activity_.end_ns = ProfileClockNs();
  RecordActivity(std::move(activity_));
}

}  // namespace torch_tpu::exec
