// Kineto's GenericTraceActivity::addMetadata formats with fmt, whose compiled part torch's
// libraries do not export: this file compiles it from the headers torch ships.
#define FMT_HEADER_ONLY

#include "python/profiler.h"

#include <kineto/libkineto.h>
#include <kineto/output_base.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exec/context.h"
#include "exec/profile.h"

namespace torch_tpu::python {

namespace {

using libkineto::ActivityType;

// The rows (kineto resources) of a device in the trace.
enum DeviceRow : int32_t { kProgramsRow = 0, kHostToDeviceRow = 1, kDeviceToHostRow = 2 };

// torch maps kernels and memcpys to the PrivateUse1 device (device time in key_averages());
// compiles and cache loads happen on the host, as a runtime's calls do.
ActivityType KinetoType(exec::ActivityKind kind) {
  switch (kind) {
    case exec::ActivityKind::kExecution:
      return ActivityType::CONCURRENT_KERNEL;
    case exec::ActivityKind::kTransferToDevice:
    case exec::ActivityKind::kTransferToHost:
      return ActivityType::GPU_MEMCPY;
    case exec::ActivityKind::kCompile:
    case exec::ActivityKind::kCacheLoad:
      return ActivityType::PRIVATEUSE1_RUNTIME;
  }
  return ActivityType::PRIVATEUSE1_RUNTIME;
}

const std::set<ActivityType>& SupportedTypes() {
  static const std::set<ActivityType> types{
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::PRIVATEUSE1_RUNTIME};
  return types;
}

bool OnDevice(exec::ActivityKind kind) {
  return KinetoType(kind) != ActivityType::PRIVATEUSE1_RUNTIME;
}

int32_t DeviceRowOf(exec::ActivityKind kind) {
  if (kind == exec::ActivityKind::kTransferToDevice) return kHostToDeviceRow;
  if (kind == exec::ActivityKind::kTransferToHost) return kDeviceToHostRow;
  return kProgramsRow;
}

const char* DeviceRowName(int32_t row) {
  if (row == kHostToDeviceRow) return "host to tpu";
  if (row == kDeviceToHostRow) return "tpu to host";
  return "programs";
}

void AddMetadata(libkineto::GenericTraceActivity& event, const exec::ProfiledActivity& activity) {
  if (!activity.signature.empty()) event.addMetadataQuoted("signature", activity.signature);
  if (!activity.reason.empty()) event.addMetadataQuoted("reason", activity.reason);
  if (activity.ops > 0) event.addMetadata("ops", activity.ops);
  if (activity.bytes > 0) event.addMetadata("bytes", activity.bytes);
}

// One profile: the recorder runs from start() to stop(), and processTrace() hands kineto what it
// recorded.
class TpuProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  explicit TpuProfilerSession(std::set<ActivityType> types) : types_(std::move(types)) {}
  ~TpuProfilerSession() override {
    if (recording_) exec::StopProfiling();
  }

  void start() override {
    if (types_.empty()) return;  // nothing asked of tpu: the recorder stays off
    exec::StartProfiling();
    recording_ = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!recording_) return;
    recorded_ = exec::StopProfiling();
    recording_ = false;
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  // The host op running on this thread: what the device activities it launches link to.
  void pushCorrelationId(uint64_t id) override { exec::PushCorrelation(id); }
  void popCorrelationId() override { exec::PopCorrelation(); }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity, int64_t start_time,
                    int64_t end_time) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_time, end_time, "tpu");
    buffer_->gpuOpCount = 0;
    for (const exec::ProfiledActivity& activity : recorded_) {
      if (types_.count(KinetoType(activity.kind)) == 0) continue;
      libkineto::GenericTraceActivity& event = AddEvent(activity, linked_activity);
      logger.handleGenericActivity(event);
    }
    recorded_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

 private:
  libkineto::GenericTraceActivity& AddEvent(
      const exec::ProfiledActivity& activity,
      const libkineto::getLinkedActivityCallback& linked_activity);

  std::set<ActivityType> types_;
  bool recording_ = false;
  std::vector<exec::ProfiledActivity> recorded_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<std::pair<int32_t, int32_t>> device_rows_;  // (device, row) pairs that hold events
};

libkineto::GenericTraceActivity& TpuProfilerSession::AddEvent(
    const exec::ProfiledActivity& activity,
    const libkineto::getLinkedActivityCallback& linked_activity) {
  buffer_->emplace_activity(buffer_->span, KinetoType(activity.kind), activity.name);
  libkineto::GenericTraceActivity& event = *buffer_->activities.back();
  event.startTime = activity.start_ns;
  event.endTime = activity.end_ns;
  event.id = static_cast<int32_t>(buffer_->activities.size());
  event.threadId = static_cast<int32_t>(activity.thread);
  if (OnDevice(activity.kind)) {
    // Device events sit on the device's rows; kineto names a device by its id.
    event.device = activity.device;
    event.resource = DeviceRowOf(activity.kind);
    device_rows_.emplace(event.device, event.resource);
    buffer_->gpuOpCount++;
  } else {
    // Host events sit on the recording thread's row of this process.
    event.device = static_cast<int32_t>(::getpid());
    event.resource = event.threadId;
  }
  if (activity.correlation != 0 && linked_activity) {
    event.linked = linked_activity(static_cast<int32_t>(activity.correlation));
  }
  AddMetadata(event, activity);
  return event;
}

std::unique_ptr<libkineto::DeviceInfo> TpuProfilerSession::getDeviceInfo() {
  // Kineto takes one device per session: the first one used (names of the others are their ids).
  const int32_t device = device_rows_.empty() ? 0 : device_rows_.begin()->first;
  std::string name = "tpu:" + std::to_string(device);
  std::string kind;  // the PJRT device kind ("cpu", "TPU v5 lite", ...)
  if (exec::IsInitialized() && device < exec::DeviceCount()) {
    name += " (" + exec::GetClient().platform_name() + ")";
    kind = exec::GetDevice(device).kind();
  }
  return std::make_unique<libkineto::DeviceInfo>(
      libkineto::DeviceInfo{device, libkineto::kExceedMaxPid + device, name, kind});
}

std::vector<libkineto::ResourceInfo> TpuProfilerSession::getResourceInfos() {
  std::vector<libkineto::ResourceInfo> rows;
  for (const auto& [device, row] : device_rows_) {
    rows.push_back(libkineto::ResourceInfo{row, row, device, DeviceRowName(row)});
  }
  return rows;
}

class TpuActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return SupportedTypes(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types, const libkineto::Config& /*config*/) override {
    std::set<ActivityType> types;
    std::set_intersection(activity_types.begin(), activity_types.end(), SupportedTypes().begin(),
                          SupportedTypes().end(), std::inserter(types, types.begin()));
    return std::make_unique<TpuProfilerSession>(std::move(types));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "torch_tpu";
};

}  // namespace

void BindProfiler(pybind11::module& /*m*/) {
  // Kineto keeps the factory until its profiler initialises (the first profile), then asks it
  // for the profiler that configures a session per profile.
  libkineto::api().registerProfilerFactory(
      [] { return std::unique_ptr<libkineto::IActivityProfiler>(new TpuActivityProfiler()); });
}

}  // namespace torch_tpu::python
