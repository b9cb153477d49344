#include "exec/context.h"

#include <pthread.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "runtime/host_heap.h"
#include "runtime/xla_flags.h"

namespace torch_tpu::exec {

namespace {

Mode ModeFromEnvironment() {
  // TORCH_TPU_<name>, or TorchTPU 0.2.0's TPU_<name> alias when the first is unset or empty:
  // "" when neither is set.
  auto setting = [](const std::string& name) {
    const char* value = std::getenv(("TORCH_TPU_" + name).c_str());
    if (value == nullptr || *value == '\0') value = std::getenv(("TPU_" + name).c_str());
    return std::string(value != nullptr ? value : "");
  };
  const std::string blocking = setting("LAUNCH_BLOCKING");
  if (!blocking.empty() && blocking != "0") return Mode::kDebug;
  // Fused eager is the default; TORCH_TPU_DEFER_AND_FUSE=0 selects strict.
  return setting("DEFER_AND_FUSE") == "0" ? Mode::kStrict : Mode::kDeferAndFuse;
}

std::atomic<int> g_mode{static_cast<int>(ModeFromEnvironment())};

// A child forked after the client started inherits its memory but not its threads, so the first
// device use would wait forever: as CUDA does, such a child refuses the device instead.
std::atomic<bool> g_forked_after_init{false};
void MarkForkedChild() { g_forked_after_init.store(true); }

struct ClientState {
  std::mutex mutex;
  std::vector<PluginCandidate> candidates;
  int num_devices = 0;
  bool tried = false;
  std::string error;
  std::string label;
  std::string xla_flags;  // as the plugin read them when it started
  std::shared_ptr<runtime::Client> client;
};

ClientState& State() {
  static ClientState* state = new ClientState();  // leaked: plugins outlive static destructors
  return *state;
}

std::function<void(const std::string&)>& WarningHandler() {
  static std::function<void(const std::string&)> handler = [](const std::string& message) {
    std::cerr << "torch_tpu warning: " << message << std::endl;
  };
  return handler;
}

}  // namespace

Mode CurrentMode() { return static_cast<Mode>(g_mode.load(std::memory_order_relaxed)); }
void SetMode(Mode mode) { g_mode.store(static_cast<int>(mode)); }

void ConfigurePlugins(std::vector<PluginCandidate> candidates, int num_devices) {
  ClientState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.candidates = std::move(candidates);
  state.num_devices = num_devices;
}

runtime::Client& GetClient() {
  if (g_forked_after_init.load()) {  // checked before locking: the parent may have held the lock
    throw std::runtime_error(
        "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you "
        "must use the 'spawn' start method");
  }
  ClientState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.client) return *state.client;
  if (!state.tried) {
    state.tried = true;
    std::string tried;
    for (const PluginCandidate& candidate : state.candidates) {
      try {
        // XLA reads XLA_FLAGS while the plugin starts (runtime/xla_flags.h).
        const runtime::ScopedCpuXlaFlags flags(runtime::IsXlaCpuPlugin(candidate.path));
        auto plugin = runtime::Plugin::Load(candidate.path);
        state.client = runtime::Client::Create(plugin, state.num_devices);
        state.label = candidate.label;
        state.xla_flags = flags.flags();
        // The CPU plugin's device memory is the malloc heap (runtime/host_heap.h).
        if (state.client->platform_name() == "cpu") runtime::KeepHostHeap();
        pthread_atfork(nullptr, nullptr, &MarkForkedChild);
        break;
      } catch (const std::exception& e) {
        tried += "\n  - " + candidate.label + " (" + candidate.path + "): " + e.what();
      }
    }
    if (!state.client) {
      state.error =
          "torch_tpu found no usable PJRT plugin. Tried:" +
          (tried.empty() ? std::string("\n  (no candidates: xla-cpu-pjrt is not installed and "
                                       "TORCH_TPU_PJRT_PLUGIN is not set)")
                         : tried) +
          "\nFix: `pip install xla-cpu-pjrt` for the CPU device, install libtpu on a TPU VM, or "
          "set "
          "TORCH_TPU_PJRT_PLUGIN to the path of a PJRT plugin (.so).";
    }
  }
  if (!state.client) throw std::runtime_error(state.error);
  return *state.client;
}

bool IsAvailable() {
  try {
    return !GetClient().devices().empty();
  } catch (const std::exception&) {
    return false;
  }
}

bool IsInitialized() {
  ClientState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.client != nullptr;
}

std::string PluginLabel() {
  ClientState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.label;
}

std::string XlaFlagsAtStart() {
  ClientState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.xla_flags;
}

int DeviceCount() { return IsAvailable() ? static_cast<int>(GetClient().devices().size()) : 0; }

const runtime::Device& GetDevice(int index) {
  const auto& devices = GetClient().devices();
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    throw std::out_of_range("tpu device index " + std::to_string(index) + " is out of range: " +
                            std::to_string(devices.size()) + " device(s) available (tpu:0 .. tpu:" +
                            std::to_string(static_cast<int>(devices.size()) - 1) +
                            "); set TORCH_TPU_NUM_DEVICES for more CPU devices");
  }
  return devices[index];
}

void SetWarningHandler(std::function<void(const std::string&)> handler) {
  WarningHandler() = std::move(handler);
}

void Warn(const std::string& message) { WarningHandler()(message); }

namespace {
std::function<SourceLocation()>& SourceLocationProvider() {
  static std::function<SourceLocation()> provider;
  return provider;
}
}  // namespace

void SetSourceLocationProvider(std::function<SourceLocation()> provider) {
  SourceLocationProvider() = std::move(provider);
}

SourceLocation CurrentSourceLocation() {
  const auto& provider = SourceLocationProvider();
  return provider ? provider() : nullptr;
}

void Metrics::CountFallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(mutex);
  ++cpu_fallbacks[op];
}

void Metrics::CountSync(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex);
  ++sync_reasons[reason];
}

void Metrics::Reset() {
  for (auto* counter :
       {&compiles, &compile_time_ns, &memory_cache_hits, &disk_cache_hits, &cache_misses,
        &executions, &execute_time_ns, &transfers_to_device, &bytes_to_device, &transfers_to_host,
        &bytes_to_host, &scalar_uploads, &meta_runs, &donated_buffers, &volatile_programs,
        &compiled_graph_calls, &compiled_graph_executions, &compiled_graph_direct_calls}) {
    counter->store(0);
  }
  std::lock_guard<std::mutex> lock(mutex);
  cpu_fallbacks.clear();
  sync_reasons.clear();
}

Metrics& GetMetrics() {
  static Metrics* metrics = new Metrics();
  return *metrics;
}

void MemoryStats::Add(int64_t bytes) {
  int64_t now = allocated.fetch_add(bytes) + bytes;
  int64_t old_peak = peak.load();
  while (now > old_peak && !peak.compare_exchange_weak(old_peak, now)) {
  }
  allocations.fetch_add(1);
}

void MemoryStats::Remove(int64_t bytes) {
  allocated.fetch_sub(bytes);
  frees.fetch_add(1);
}

MemoryStats& GetMemoryStats(int device) {
  static MemoryStats* stats = new MemoryStats[64];
  return stats[device < 0 || device >= 64 ? 0 : device];
}

std::string CacheDirectory() {
  if (const char* dir = std::getenv("TORCH_TPU_CACHE_DIR"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/torch_tpu";
}

std::string DumpDirectory() {
  if (const char* dir = std::getenv("TORCH_TPU_DUMP_DIR"); dir && *dir) return dir;
  return (std::filesystem::temp_directory_path() / "torch_tpu_dumps").string();
}

}  // namespace torch_tpu::exec
