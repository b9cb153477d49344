// Process-wide execution context: the chosen plugin and client, execution mode, metrics, and the
// hooks the binding layer installs (warnings). Knows nothing of ATen op semantics.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/pjrt.h"

namespace torch_tpu::exec {

enum class Mode { kStrict = 0, kDebug = 1, kDeferAndFuse = 2 };
Mode CurrentMode();
void SetMode(Mode mode);

struct PluginCandidate {
  std::string label;  // "TORCH_TPU_PJRT_PLUGIN", "libtpu", "xla-cpu-pjrt"
  std::string path;
};

// Set once by the Python layer before first device use.
void ConfigurePlugins(std::vector<PluginCandidate> candidates, int num_devices);
// Loads the plugin and creates the client on first call; throws a message listing what was tried.
runtime::Client& GetClient();
bool IsAvailable();  // tries to initialise; never throws
bool IsInitialized();
const runtime::Device& GetDevice(int index);
int DeviceCount();  // 0 when unavailable
std::string PluginLabel();
// XLA_FLAGS as the plugin read them when its client started (runtime/xla_flags.h): part of the
// disk cache's identity, since they change the programs compiled. "" before then or when unset.
std::string XlaFlagsAtStart();

// Warnings are routed to the binding layer (TORCH_WARN); default prints to stderr.
void SetWarningHandler(std::function<void(const std::string&)> handler);
void Warn(const std::string& message);

// The user's source line ("file.py:12"), from the binding layer; null when unknown. Interned: one
// string per line, so that recording an op does not format one (fused mode records every op's).
using SourceLocation = std::shared_ptr<const std::string>;
void SetSourceLocationProvider(std::function<SourceLocation()> provider);
SourceLocation CurrentSourceLocation();

struct Metrics {
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_time_ns{0};
  std::atomic<int64_t> memory_cache_hits{0};
  std::atomic<int64_t> disk_cache_hits{0};
  std::atomic<int64_t> cache_misses{0};
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> execute_time_ns{0};
  std::atomic<int64_t> transfers_to_device{0};
  std::atomic<int64_t> bytes_to_device{0};
  std::atomic<int64_t> transfers_to_host{0};
  std::atomic<int64_t> bytes_to_host{0};
  std::atomic<int64_t> scalar_uploads{0};
  std::atomic<int64_t> meta_runs{0};  // PyTorch meta functions run (aten/meta_cache.h misses)
  std::atomic<int64_t> donated_buffers{0};
  std::atomic<int64_t> volatile_programs{0};          // recording sites whose cuts keep recompiling
  std::atomic<int64_t> compiled_graph_calls{0};       // torch.compile graphs run
  std::atomic<int64_t> compiled_graph_executions{0};  // the programs they ran (in `executions` too)
  std::atomic<int64_t> compiled_graph_direct_calls{0};  // calls launched from a plan, unrecorded
  std::mutex mutex;
  std::map<std::string, int64_t> cpu_fallbacks;  // per op
  std::map<std::string, int64_t> sync_reasons;   // per reason
  void CountFallback(const std::string& op);
  void CountSync(const std::string& reason);
  void Reset();
};
Metrics& GetMetrics();

// Per-device memory accounting of storage bytes (see DeviceStorage).
struct MemoryStats {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> frees{0};
  void Add(int64_t bytes);
  void Remove(int64_t bytes);
};
MemoryStats& GetMemoryStats(int device);

std::string CacheDirectory();  // TORCH_TPU_CACHE_DIR or ~/.cache/torch_tpu
std::string DumpDirectory();   // TORCH_TPU_DUMP_DIR or <tmp>/torch_tpu_dumps

}  // namespace torch_tpu::exec
