#include "exec/compile_cache.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "exec/context.h"
#include "exec/profile.h"

namespace torch_tpu::exec {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'X', 'E', '1', '\n'};

using Future = std::shared_future<std::shared_ptr<runtime::Executable>>;

// The lines of a /proc file (the process's memory mappings), or 0 where it cannot be read.
size_t CountLines(const char* path) {
  std::ifstream in(path, std::ios::binary);
  size_t lines = 0;
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    lines += static_cast<size_t>(std::count(chunk.data(), chunk.data() + in.gcount(), '\n'));
  }
  return lines;
}

// The kernel's limit on a process's memory mappings (vm.max_map_count), or its default.
// TORCH_TPU_MAX_MAP_COUNT stands in for it (the tests of the bound below).
size_t MaxMapCount() {
  if (const char* value = std::getenv("TORCH_TPU_MAX_MAP_COUNT")) return std::atoll(value);
  std::ifstream in("/proc/sys/vm/max_map_count");
  size_t limit = 0;
  return in >> limit && limit > 0 ? limit : 65530;
}

// Executables loaded in this process, least recently used dropped past a bound: each one holds
// JIT code in memory mappings, well under one per program for single ops but about twenty for a
// fused program of tens of ops. A process that loads too many reaches the kernel's mapping limit
// (vm.max_map_count), where the plugin's code generation fails and crashes. A dropped executable
// is loaded again from the disk cache.
struct MemoryCache {
  static constexpr size_t kReboundEvery = 64;  // new entries between measurements
  static constexpr size_t kMinCapacity = 64;
  struct Entry {
    Future future;
    uint64_t last_use = 0;
  };
  std::mutex mutex;
  std::unordered_map<ir::Signature, Entry, ir::SignatureHash> entries;
  uint64_t clock = 0;
  // TORCH_TPU_MEMORY_CACHE_ENTRIES, or 4096: the most entries ever kept.
  const size_t configured = [] {
    const char* value = std::getenv("TORCH_TPU_MEMORY_CACHE_ENTRIES");
    const long long parsed = value != nullptr ? std::atoll(value) : 0;
    return parsed > 0 ? static_cast<size_t>(parsed) : size_t{4096};
  }();
  size_t capacity = configured;
  size_t inserted = 0;
  const size_t baseline_maps = CountLines("/proc/self/maps");  // before the first executable

  // Every kReboundEvery new entries, the mappings the process gained since the cache began, per
  // entry, set the bound so that cached executables keep within half of the kernel's limit.
  // (Other mappings that grew meanwhile count too, which errs on the side of fewer entries.)
  void NoteInserted() {
    if (++inserted % kReboundEvery != 0 || entries.empty()) return;
    const size_t maps = CountLines("/proc/self/maps");
    const size_t budget = MaxMapCount() / 2;
    if (maps == 0 || budget <= baseline_maps) return;
    const double per_entry =
        std::max(1.0, static_cast<double>(maps - std::min(maps, baseline_maps)) / entries.size());
    capacity = std::clamp(static_cast<size_t>((budget - baseline_maps) / per_entry),
                          std::min(kMinCapacity, configured), configured);
  }

  // Drops the least recently used ready entries down to 90% of the capacity. Executions still
  // running keep what they use alive (PJRT holds the compiled code until they finish).
  void EvictIfFull() {
    if (entries.size() <= capacity) return;
    std::vector<std::pair<uint64_t, ir::Signature>> ready;
    for (const auto& [signature, entry] : entries) {
      if (entry.future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        ready.emplace_back(entry.last_use, signature);
      }
    }
    const size_t target = capacity - capacity / 10;
    const size_t drop = std::min(ready.size(), entries.size() - std::min(entries.size(), target));
    std::partial_sort(ready.begin(), ready.begin() + static_cast<std::ptrdiff_t>(drop), ready.end(),
                      [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < drop; ++i) entries.erase(ready[i].second);
  }
};

MemoryCache& Memory() {
  static MemoryCache* cache = new MemoryCache();
  return *cache;
}

bool ReadFile(const fs::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  out = buffer.str();
  return true;
}

// Writes to a temporary file in the same directory, then renames: readers never see a torn entry.
void AtomicWrite(const fs::path& path, const std::string& bytes) {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  fs::path temporary = path;
  temporary += ".tmp." + std::to_string(::getpid()) + "." +
               std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      fs::remove(temporary, error);
      return;
    }
  }
  fs::rename(temporary, path, error);
  if (error) fs::remove(temporary, error);
}

std::string Checksum(const std::string& payload) {
  ir::Hasher h;
  h.Add(payload.data(), payload.size());
  return h.Finish().ToHex();
}

std::string EncodeEntry(const std::string& payload) {
  std::string entry(kMagic, sizeof(kMagic));
  entry += Checksum(payload);
  entry += payload;
  return entry;
}

// Returns false for anything that is not an intact entry.
bool DecodeEntry(const std::string& entry, std::string& payload) {
  const size_t header = sizeof(kMagic) + 32;
  if (entry.size() < header || std::memcmp(entry.data(), kMagic, sizeof(kMagic)) != 0) return false;
  payload = entry.substr(header);
  return entry.compare(sizeof(kMagic), 32, Checksum(payload)) == 0;
}

// No build loads another build's programs (nor a plugin another plugin's), so each rebuild or
// upgrade would leave a folder of dead programs behind. A folder's time is stamped when a process
// first uses it; beside the one in use, only the most recently used few are kept.
constexpr size_t kOtherFoldersKept = 3;

void RemoveAllButMostRecent(const fs::path& parent, const fs::path& in_use) {
  std::error_code error;
  std::vector<std::pair<fs::file_time_type, fs::path>> others;
  for (fs::directory_iterator it(parent, error), end; !error && it != end; it.increment(error)) {
    std::error_code entry_error;  // an entry that cannot be read is left alone
    if (it->path() == in_use || !it->is_directory(entry_error)) continue;
    const auto last_use = it->last_write_time(entry_error);
    if (!entry_error) others.emplace_back(last_use, it->path());
  }
  if (others.size() <= kOtherFoldersKept) return;
  std::sort(others.begin(), others.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = kOtherFoldersKept; i < others.size(); ++i) {
    fs::remove_all(others[i].second, error);
  }
}

// This build's folder of programs, stamped and its stale siblings removed once per process.
fs::path BuildFolder() {
  const fs::path plugin = fs::path(CacheDirectory()) / "executables" / PluginIdentity();
  fs::path build = plugin / ExtensionIdentity();
  static std::mutex mutex;
  static std::unordered_set<std::string> prepared;  // TORCH_TPU_CACHE_DIR may change
  std::lock_guard<std::mutex> lock(mutex);
  if (prepared.insert(build.string()).second) {
    std::error_code error;
    fs::create_directories(build, error);
    const auto now = fs::file_time_type::clock::now();
    fs::last_write_time(build, now, error);
    fs::last_write_time(plugin, now, error);
    RemoveAllButMostRecent(plugin, build);
    RemoveAllButMostRecent(plugin.parent_path(), plugin);
  }
  return build;
}

fs::path EntryPath(const ir::Signature& signature) {
  return BuildFolder() / (signature.ToHex() + ".bin");
}

bool DiskCacheEnabled() {
  const char* value = std::getenv("TORCH_TPU_DISK_CACHE");
  return value == nullptr || std::string(value) != "0";
}

// "compile program 1a2b3c4d", "load cached program 1a2b3c4d": a compile or a disk-cache load in
// a profile.
void NameProgramActivity(ProfiledActivity& activity, const char* verb,
                         const ir::Signature& signature) {
  activity.signature = signature.ToHex();
  activity.name = std::string(verb) + " program " + activity.signature.substr(0, 8);
}

// `key` keys both caches; `signature`, the program's own, names it in profiles and dumps.
std::shared_ptr<runtime::Executable> CompileOrLoad(const ir::Signature& key,
                                                   const ir::Signature& signature,
                                                   const std::function<std::string()>& print,
                                                   const runtime::CompileOptions& options) {
  runtime::Client& client = GetClient();
  Metrics& metrics = GetMetrics();
  fs::path path;
  if (DiskCacheEnabled()) {
    path = EntryPath(key);
    std::string entry, payload;
    if (ReadFile(path, entry)) {
      if (DecodeEntry(entry, payload)) {
        try {
          ProfiledScope profiled(ActivityKind::kCacheLoad, 0);
          if (profiled.active()) NameProgramActivity(profiled.activity(), "load cached", signature);
          auto executable = client.Deserialize(payload);
          metrics.disk_cache_hits++;
          return executable;
        } catch (const std::exception& e) {
          Warn("torch_tpu: compile cache entry " + path.string() + " could not be loaded (" +
               e.what() + "); recompiling");
        }
      } else {
        Warn("torch_tpu: compile cache entry " + path.string() +
             " is corrupt; recompiling and replacing it");
      }
    }
  }
  metrics.cache_misses++;
  const std::string text = print();
  // TORCH_TPU_DUMP_PROGRAMS=1 writes every program compiled, not only the failing ones.
  static const bool dump_all = [] {
    const char* value = std::getenv("TORCH_TPU_DUMP_PROGRAMS");
    return value != nullptr && std::string(value) == "1";
  }();
  if (dump_all) DumpProgram(signature, text);
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<runtime::Executable> executable;
  try {
    ProfiledScope profiled(ActivityKind::kCompile, 0);
    if (profiled.active()) NameProgramActivity(profiled.activity(), "compile", signature);
    executable = client.Compile(text, options);
  } catch (const runtime::PjrtError& e) {
    const std::string dump = DumpProgram(signature, text);
    throw runtime::PjrtError(
        e.code(), std::string(e.what()) + "\nThe StableHLO program was written to " + dump);
  }
  metrics.compile_time_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  metrics.compiles++;
  if (!path.empty()) {
    try {
      std::string bytes = executable->Serialize();
      if (!bytes.empty()) AtomicWrite(path, EncodeEntry(bytes));
    } catch (const std::exception& e) {
      Warn(std::string("torch_tpu: could not serialize an executable for the disk cache: ") +
           e.what());
    }
  }
  return executable;
}

// A fast 128-bit hash of a file (the plugin, this extension), remembered per (path, size, mtime).
std::string HashFile(const std::string& path) {
  struct stat info{};
  if (::stat(path.c_str(), &info) != 0) return "unknown";
  ir::Hasher key;
  key.Add(path);
  key.Add(static_cast<uint64_t>(info.st_size));
  key.Add(static_cast<uint64_t>(info.st_mtim.tv_sec) * 1000000000ull + info.st_mtim.tv_nsec);
  const fs::path memo = fs::path(CacheDirectory()) / "file-hashes" / key.Finish().ToHex();
  std::string remembered;
  if (ReadFile(memo, remembered) && remembered.size() == 32) return remembered;
  std::ifstream in(path, std::ios::binary);
  ir::Hasher h;
  std::vector<char> chunk(1 << 22);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    h.Add(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  const std::string digest = h.Finish().ToHex();
  AtomicWrite(memo, digest);
  return digest;
}

// The memory cache in front of CompileOrLoad.
std::shared_ptr<runtime::Executable> CachedExecutable(const ir::Signature& key,
                                                      const ir::Signature& signature,
                                                      const std::function<std::string()>& print,
                                                      const runtime::CompileOptions& options) {
  MemoryCache& cache = Memory();
  std::promise<std::shared_ptr<runtime::Executable>> promise;
  Future future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.entries.find(key);
    if (it != cache.entries.end()) {
      future = it->second.future;
      it->second.last_use = ++cache.clock;
    } else {
      cache.EvictIfFull();
      future = promise.get_future().share();
      cache.entries.emplace(key, MemoryCache::Entry{future, ++cache.clock});
      cache.NoteInserted();
      owner = true;
    }
  }
  if (!owner) {
    GetMetrics().memory_cache_hits++;
    return future.get();
  }
  try {
    auto executable = CompileOrLoad(key, signature, print, options);
    if (!options.portable && options.device_assignment.size() == 1) {
      executable->BindToDevice(options.device_assignment[0]);
    }
    promise.set_value(std::move(executable));
  } catch (...) {
    // A failed compile is not cached: waiters see the error, later callers try again.
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.entries.erase(key);
  }
  return future.get();
}

}  // namespace

std::string PluginIdentity() {
  static std::once_flag once;
  static std::string identity;
  std::call_once(once, [] {
    const auto& plugin = *GetClient().plugin();
    identity = HashFile(plugin.path()).substr(0, 16) + "-v" +
               std::to_string(plugin.major_version()) + "." +
               std::to_string(plugin.minor_version());
    // The compiler's flags shape its programs: other flags, other folder.
    const std::string flags = XlaFlagsAtStart();
    if (!flags.empty()) {
      ir::Hasher hash;
      hash.Add(flags);
      identity += "-flags-" + hash.Finish().ToHex().substr(0, 8);
    }
  });
  return identity;
}

std::string ExtensionIdentity() {
  static const std::string identity = [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<const void*>(&ExtensionIdentity), &info) == 0 ||
        info.dli_fname == nullptr) {
      return std::string("unknown");
    }
    return "ext-" + HashFile(info.dli_fname).substr(0, 16);
  }();
  return identity;
}

std::shared_ptr<runtime::Executable> GetExecutable(const ir::Signature& signature,
                                                   const std::function<std::string()>& print) {
  return GetExecutable(signature, print, runtime::CompileOptions{});
}

std::shared_ptr<runtime::Executable> GetExecutable(const ir::Signature& signature,
                                                   const std::function<std::string()>& print,
                                                   const runtime::CompileOptions& options) {
  return CachedExecutable(signature, signature, print, options);
}

std::shared_ptr<runtime::Executable> GetExecutableFor(const ir::Signature& signature,
                                                      const std::function<std::string()>& print,
                                                      const runtime::Device& device) {
  if (device.index() != 0) return GetExecutable(signature, print);
  runtime::CompileOptions options;
  options.portable = false;
  options.device_assignment = {device.id()};
  // Runs on every launch: four words, no text.
  constexpr uint64_t kBoundToDevice = 0x626F756E642D6465ull;
  ir::Hasher key;
  key.Add(signature.high);
  key.Add(signature.low);
  key.Add(kBoundToDevice);
  key.Add(static_cast<uint64_t>(device.id()));
  return CachedExecutable(key.Finish(), signature, print, options);
}

void ClearMemoryCache() {
  MemoryCache& cache = Memory();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.entries.clear();
}

std::string DumpProgram(const ir::Signature& signature, const std::string& text) {
  const fs::path path = fs::path(DumpDirectory()) / ("program-" + signature.ToHex() + ".mlir");
  AtomicWrite(path, text);
  return path.string();
}

}  // namespace torch_tpu::exec
