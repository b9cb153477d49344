// PJRT C API wrapper: plugin loading, client, devices, buffers, executables, events.
// Knows nothing of torch. Every PJRT_Error becomes a PjrtError carrying the plugin's message.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_LoadedExecutable;
struct PJRT_Error;

namespace torch_tpu::runtime {

// Mirrors PJRT_Buffer_Type (values are checked against the header in pjrt.cc).
enum class ElementType : int {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kC64 = 14,
  kC128 = 15,
};

size_t ElementSize(ElementType type);

class PjrtError : public std::runtime_error {
 public:
  PjrtError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }
  bool is_resource_exhausted() const { return code_ == 8; }

 private:
  int code_;
};

// A loaded plugin. Never unloaded: plugins register global state that does not survive dlclose.
class Plugin {
 public:
  // dlopen(path, RTLD_LOCAL), GetPjrtApi, version and struct-size checks, PJRT_Plugin_Initialize.
  static std::shared_ptr<Plugin> Load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int major_version() const { return major_; }
  int minor_version() const { return minor_; }
  static int header_major_version();
  static int header_minor_version();
  // True when the plugin's PJRT_Api struct is large enough to hold the entry at `offset`.
  bool HasEntry(size_t offset_of_entry) const;
  // Throws PjrtError with the plugin's message if `error` is non-null; frees it.
  void Check(PJRT_Error* error, const char* what) const;
  // Whether device memory is this process's memory (XLA's CPU plugin), so that a computed buffer
  // can be read in place. Set by Client::Create from the platform name.
  bool device_memory_is_host() const { return device_memory_is_host_; }
  void set_device_memory_is_host(bool value) { device_memory_is_host_ = value; }

 private:
  const PJRT_Api* api_ = nullptr;
  std::string path_;
  int major_ = 0;
  int minor_ = 0;
  bool device_memory_is_host_ = false;
};

class Event : public std::enable_shared_from_this<Event> {
 public:
  Event(std::shared_ptr<Plugin> plugin, PJRT_Event* event)
      : plugin_(std::move(plugin)), event_(event) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Blocks until ready; throws the event's error, if any.
  void Await();
  bool IsReady() const;
  // Calls `callback` once ready (or failed), without waiting: on a plugin thread, or on this one
  // if it is ready already. The event is kept alive until then. The callback must not throw.
  void OnReady(std::function<void()> callback);

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_Event* event_;
};

class Device {
 public:
  Device(PJRT_Device* device, int index, std::string kind, int64_t id = -1)
      : device_(device), index_(index), kind_(std::move(kind)), id_(id < 0 ? index : id) {}
  PJRT_Device* raw() const { return device_; }
  int index() const { return index_; }
  const std::string& kind() const { return kind_; }
  // The plugin's global device id, which device assignments name (the index on one host).
  int64_t id() const { return id_; }

 private:
  PJRT_Device* device_;
  int index_;
  std::string kind_;
  int64_t id_;
};

class Buffer {
 public:
  Buffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  PJRT_Buffer* raw() const { return buffer_; }
  ElementType element_type() const;
  std::vector<int64_t> dimensions() const;
  // Copies the dense row-major contents into dst; blocks until done.
  void ToHost(void* dst, size_t size) const;
  // Waits until the buffer's value has been computed; throws the computation's error, if any.
  void AwaitReady() const;
  // Whether the value has been computed (or its computation failed), without waiting.
  bool IsReady() const;
  // An event ready once the value is computed; it outlives the buffer, so it can stand for the
  // execution that computes the buffer after the buffer is freed.
  std::shared_ptr<Event> ReadyEvent() const;
  // Calls `callback` once the value has been computed or its computation failed, without waiting:
  // on a plugin thread, or on this one if it is ready already. The callback must not throw.
  void OnReady(std::function<void()> callback) const;
  std::shared_ptr<Buffer> CopyToDevice(const Device& device) const;
  // After donation the plugin owns the memory; the handle is still destroyed normally.
  void MarkDonated() { donated_ = true; }
  bool donated() const { return donated_; }

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_Buffer* buffer_;
  bool donated_ = false;
};

class Executable {
 public:
  Executable(std::shared_ptr<Plugin> plugin, PJRT_LoadedExecutable* executable);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  size_t num_outputs() const { return num_outputs_; }
  // Marks it as compiled for device `id` alone (a one-device assignment, not portable). Its
  // launches then name no execute device: the plugin's path for an execute device copies the
  // executable's compile options on every launch, a cost that grows with the argument count.
  void BindToDevice(int64_t id) { bound_device_ = id; }
  // Runs asynchronously on `device` (the bound device, if bound). Inputs not listed in `donated`
  // are never donated.
  std::vector<std::shared_ptr<Buffer>> Execute(const std::vector<PJRT_Buffer*>& arguments,
                                               const std::vector<bool>& donated,
                                               const Device& device);
  // Runs once on every device of the executable's device assignment, in one launch: list r
  // holds replica r's arguments (on its assigned device). Returns each replica's outputs.
  // Arguments are never donated.
  std::vector<std::vector<std::shared_ptr<Buffer>>> ExecuteReplicated(
      const std::vector<std::vector<PJRT_Buffer*>>& argument_lists);
  // Plugin-specific serialized form, for the disk cache.
  std::string Serialize() const;
  // Whether a run of it has completed without error (the execution layer awaits runs until then).
  bool ran_cleanly() const { return ran_cleanly_.load(std::memory_order_relaxed); }
  void MarkRanCleanly() { ran_cleanly_.store(true, std::memory_order_relaxed); }

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_LoadedExecutable* executable_;
  size_t num_outputs_ = 0;
  int64_t bound_device_ = -1;  // -1: portable
  std::atomic<bool> ran_cleanly_{false};
};

struct CompileOptions {
  int num_replicas = 1;
  int num_partitions = 1;
  // Portable executables run on any device chosen at execute time.
  bool portable = true;
  // Replica r runs on the device with id device_assignment[r] (num_partitions must be 1). When
  // given, the executable is not portable: it is launched on all its devices at once.
  std::vector<int64_t> device_assignment;
};

// Hand-encoded xla.CompileOptionsProto; an empty options string aborts the CPU plugin.
std::string EncodeCompileOptions(const CompileOptions& options);

class Client {
 public:
  // `cpu_device_count` <= 0 leaves the plugin's default.
  static std::shared_ptr<Client> Create(std::shared_ptr<Plugin> plugin, int cpu_device_count);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::shared_ptr<Plugin>& plugin() const { return plugin_; }
  const std::vector<Device>& devices() const { return devices_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }

  // Copies `data` (dense, row-major) before returning.
  std::shared_ptr<Buffer> BufferFromHost(const void* data, ElementType type,
                                         const std::vector<int64_t>& dims, const Device& device);
  std::shared_ptr<Executable> Compile(const std::string& mlir_text, const CompileOptions& options);
  std::shared_ptr<Executable> Deserialize(const std::string& serialized);

 private:
  Client(std::shared_ptr<Plugin> plugin, PJRT_Client* client);
  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_;
  std::vector<Device> devices_;
  std::string platform_name_;
  std::string platform_version_;
};

}  // namespace torch_tpu::runtime
