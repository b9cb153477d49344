#include "runtime/pjrt.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "pjrt_c_api.h"
#include "runtime/buffer_release.h"

namespace torch_tpu::runtime {
namespace {

static_assert(static_cast<int>(ElementType::kPred) == PJRT_Buffer_Type_PRED);
static_assert(static_cast<int>(ElementType::kS64) == PJRT_Buffer_Type_S64);
static_assert(static_cast<int>(ElementType::kU64) == PJRT_Buffer_Type_U64);
static_assert(static_cast<int>(ElementType::kF64) == PJRT_Buffer_Type_F64);
static_assert(static_cast<int>(ElementType::kBF16) == PJRT_Buffer_Type_BF16);
static_assert(static_cast<int>(ElementType::kC128) == PJRT_Buffer_Type_C128);

// Zero-initialised args struct with its struct_size set, as every PJRT call expects.
template <typename T>
T MakeArgs(size_t struct_size) {
  T args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = struct_size;
  return args;
}

#define PJRT_ARGS(name) MakeArgs<name##_Args>(name##_Args_STRUCT_SIZE)

// Calls an entry after checking the plugin's struct is large enough to hold it.
#define PJRT_CALL(plugin, name, args)                                                    \
  do {                                                                                   \
    if (!(plugin).HasEntry(offsetof(PJRT_Api, name)) || (plugin).api()->name == nullptr) \
      throw PjrtError(12, std::string("PJRT plugin does not provide ") + #name);         \
    (plugin).Check((plugin).api()->name(&(args)), #name);                                \
  } while (0)

}  // namespace

size_t ElementSize(ElementType type) {
  switch (type) {
    case ElementType::kPred:
    case ElementType::kS8:
    case ElementType::kU8:
      return 1;
    case ElementType::kS16:
    case ElementType::kU16:
    case ElementType::kF16:
    case ElementType::kBF16:
      return 2;
    case ElementType::kS32:
    case ElementType::kU32:
    case ElementType::kF32:
      return 4;
    case ElementType::kS64:
    case ElementType::kU64:
    case ElementType::kF64:
    case ElementType::kC64:
      return 8;
    case ElementType::kC128:
      return 16;
    default:
      throw std::invalid_argument("ElementSize: invalid element type");
  }
}

// ---- Plugin ----

int Plugin::header_major_version() { return PJRT_API_MAJOR; }
int Plugin::header_minor_version() { return PJRT_API_MINOR; }

bool Plugin::HasEntry(size_t offset_of_entry) const {
  return offset_of_entry + sizeof(void*) <= api_->struct_size;
}

void Plugin::Check(PJRT_Error* error, const char* what) const {
  if (error == nullptr) return;
  auto message_args = PJRT_ARGS(PJRT_Error_Message);
  message_args.error = error;
  api_->PJRT_Error_Message(&message_args);
  std::string message(message_args.message, message_args.message_size);
  int code = PJRT_Error_Code_UNKNOWN;
  if (HasEntry(offsetof(PJRT_Api, PJRT_Error_GetCode))) {
    auto code_args = PJRT_ARGS(PJRT_Error_GetCode);
    code_args.error = error;
    if (api_->PJRT_Error_GetCode(&code_args) == nullptr) code = code_args.code;
  }
  auto destroy_args = PJRT_ARGS(PJRT_Error_Destroy);
  destroy_args.error = error;
  api_->PJRT_Error_Destroy(&destroy_args);
  throw PjrtError(code, std::string(what) + ": " + message);
}

std::shared_ptr<Plugin> Plugin::Load(const std::string& path) {
  // RTLD_LOCAL keeps the plugin's LLVM/absl symbols away from torch's; never dlclose'd.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw PjrtError(5, "cannot load PJRT plugin '" + path + "': " + (reason ? reason : "?"));
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) throw PjrtError(5, "'" + path + "' has no GetPjrtApi symbol");
  auto plugin = std::shared_ptr<Plugin>(new Plugin());
  plugin->api_ = get_api();
  plugin->path_ = path;
  if (plugin->api_ == nullptr) throw PjrtError(2, "GetPjrtApi returned null in '" + path + "'");
  plugin->major_ = plugin->api_->pjrt_api_version.major_version;
  plugin->minor_ = plugin->api_->pjrt_api_version.minor_version;
  // Minor versions only append: entries to PJRT_Api and fields to argument structs, each of which
  // carries its struct_size. So a newer plugin reads our smaller structs (libtpu and the CUDA
  // plugin are ahead of this header), and an older one is asked only for entries it has (HasEntry).
  if (plugin->major_ != PJRT_API_MAJOR) {
    throw PjrtError(9, "PJRT plugin '" + path + "' has API version " +
                           std::to_string(plugin->major_) + "." + std::to_string(plugin->minor_) +
                           ", whose major version differs from the header torch_tpu was built "
                           "with (" +
                           std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                           "); rebuild torch_tpu against that plugin's pjrt_c_api.h");
  }
  if (plugin->HasEntry(offsetof(PJRT_Api, PJRT_Plugin_Initialize)) &&
      plugin->api_->PJRT_Plugin_Initialize != nullptr) {
    auto args = PJRT_ARGS(PJRT_Plugin_Initialize);
    plugin->Check(plugin->api_->PJRT_Plugin_Initialize(&args), "PJRT_Plugin_Initialize");
  }
  return plugin;
}

// ---- Event ----

Event::~Event() {
  if (event_ == nullptr) return;
  auto args = PJRT_ARGS(PJRT_Event_Destroy);
  args.event = event_;
  plugin_->api()->PJRT_Event_Destroy(&args);
}

void Event::Await() {
  auto args = PJRT_ARGS(PJRT_Event_Await);
  args.event = event_;
  PJRT_CALL(*plugin_, PJRT_Event_Await, args);
}

bool Event::IsReady() const {
  auto args = PJRT_ARGS(PJRT_Event_IsReady);
  args.event = event_;
  PJRT_CALL(*plugin_, PJRT_Event_IsReady, args);
  return args.is_ready;
}

// ---- Buffer ----

Buffer::Buffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer)
    : plugin_(std::move(plugin)), buffer_(buffer) {}

Buffer::~Buffer() {
  if (donated_) {
    RetireDonatedBuffer(std::move(plugin_), buffer_);
  } else {
    DestroyBuffer(*plugin_, buffer_);
  }
}

ElementType Buffer::element_type() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ElementType);
  args.buffer = buffer_;
  PJRT_CALL(*plugin_, PJRT_Buffer_ElementType, args);
  return static_cast<ElementType>(args.type);
}

std::vector<int64_t> Buffer::dimensions() const {
  auto args = PJRT_ARGS(PJRT_Buffer_Dimensions);
  args.buffer = buffer_;
  PJRT_CALL(*plugin_, PJRT_Buffer_Dimensions, args);
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

void Buffer::ToHost(void* dst, size_t size) const {
  if (plugin_->device_memory_is_host()) {
    // XLA's CPU client copies on its thread pool and wakes the caller: about 60 us for a scalar
    // (item()), most of it two thread hand-offs. Its memory is ours, so a computed buffer of the
    // dense size is copied here. (Another size means a packed or padded layout: the plugin reads
    // that one.)
    AwaitReady();
    auto size_args = PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes);
    size_args.buffer = buffer_;
    PJRT_CALL(*plugin_, PJRT_Buffer_OnDeviceSizeInBytes, size_args);
    if (size_args.on_device_size_in_bytes == size) {
      auto pointer_args = PJRT_ARGS(PJRT_Buffer_UnsafePointer);
      pointer_args.buffer = buffer_;
      PJRT_CALL(*plugin_, PJRT_Buffer_UnsafePointer, pointer_args);
      std::memcpy(dst, reinterpret_cast<const void*>(pointer_args.buffer_pointer), size);
      return;
    }
  }
  auto args = PJRT_ARGS(PJRT_Buffer_ToHostBuffer);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = size;
  PJRT_CALL(*plugin_, PJRT_Buffer_ToHostBuffer, args);
  Event(plugin_, args.event).Await();
}

void Buffer::AwaitReady() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ReadyEvent);
  args.buffer = buffer_;
  PJRT_CALL(*plugin_, PJRT_Buffer_ReadyEvent, args);
  Event(plugin_, args.event).Await();
}

std::shared_ptr<Event> Buffer::ReadyEvent() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ReadyEvent);
  args.buffer = buffer_;
  PJRT_CALL(*plugin_, PJRT_Buffer_ReadyEvent, args);
  return std::make_shared<Event>(plugin_, args.event);
}

bool Buffer::IsReady() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ReadyEvent);
  args.buffer = buffer_;
  PJRT_CALL(*plugin_, PJRT_Buffer_ReadyEvent, args);
  return Event(plugin_, args.event).IsReady();
}

namespace {
// What an OnReady callback owns until the plugin calls it: the event (destroyed afterwards) and
// the caller's callback.
struct ReadyCallback {
  std::shared_ptr<Plugin> plugin;
  std::shared_ptr<Event> event;
  std::function<void()> callback;
};

void RunReadyCallback(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<ReadyCallback> ready(static_cast<ReadyCallback*>(user_arg));
  if (error != nullptr) {
    // The callback owns the error; a failed computation is finished all the same.
    auto args = PJRT_ARGS(PJRT_Error_Destroy);
    args.error = error;
    ready->plugin->api()->PJRT_Error_Destroy(&args);
  }
  ready->callback();
}
}  // namespace

void Event::OnReady(std::function<void()> callback) {
  auto ready = std::unique_ptr<ReadyCallback>(
      new ReadyCallback{plugin_, shared_from_this(), std::move(callback)});
  auto args = PJRT_ARGS(PJRT_Event_OnReady);
  args.event = event_;
  args.callback = &RunReadyCallback;
  args.user_arg = ready.get();
  PJRT_CALL(*plugin_, PJRT_Event_OnReady, args);
  ready.release();  // RunReadyCallback owns it now
}

void Buffer::OnReady(std::function<void()> callback) const {
  ReadyEvent()->OnReady(std::move(callback));
}

std::shared_ptr<Buffer> Buffer::CopyToDevice(const Device& device) const {
  auto args = PJRT_ARGS(PJRT_Buffer_CopyToDevice);
  args.buffer = buffer_;
  args.dst_device = device.raw();
  PJRT_CALL(*plugin_, PJRT_Buffer_CopyToDevice, args);
  return std::make_shared<Buffer>(plugin_, args.dst_buffer);
}

// ---- Executable ----

Executable::Executable(std::shared_ptr<Plugin> plugin, PJRT_LoadedExecutable* executable)
    : plugin_(std::move(plugin)), executable_(executable) {
  auto get_args = PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable);
  get_args.loaded_executable = executable_;
  PJRT_CALL(*plugin_, PJRT_LoadedExecutable_GetExecutable, get_args);
  auto outputs_args = PJRT_ARGS(PJRT_Executable_NumOutputs);
  outputs_args.executable = get_args.executable;
  PJRT_Error* error = plugin_->api()->PJRT_Executable_NumOutputs(&outputs_args);
  auto destroy_args = PJRT_ARGS(PJRT_Executable_Destroy);
  destroy_args.executable = get_args.executable;
  plugin_->api()->PJRT_Executable_Destroy(&destroy_args);
  plugin_->Check(error, "PJRT_Executable_NumOutputs");
  num_outputs_ = outputs_args.num_outputs;
}

Executable::~Executable() {
  auto args = PJRT_ARGS(PJRT_LoadedExecutable_Destroy);
  args.executable = executable_;
  plugin_->api()->PJRT_LoadedExecutable_Destroy(&args);
}

std::vector<std::shared_ptr<Buffer>> Executable::Execute(const std::vector<PJRT_Buffer*>& arguments,
                                                         const std::vector<bool>& donated,
                                                         const Device& device) {
  std::vector<int64_t> non_donatable;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (i >= donated.size() || !donated[i]) non_donatable.push_back(static_cast<int64_t>(i));
  }
  auto options = MakeArgs<PJRT_ExecuteOptions>(PJRT_ExecuteOptions_STRUCT_SIZE);
  options.non_donatable_input_indices = non_donatable.data();
  options.num_non_donatable_input_indices = non_donatable.size();

  std::vector<PJRT_Buffer*> outputs(num_outputs_, nullptr);
  PJRT_Buffer* const* argument_list = arguments.data();
  PJRT_Buffer** output_list = outputs.data();

  auto args = PJRT_ARGS(PJRT_LoadedExecutable_Execute);
  args.executable = executable_;
  args.options = &options;
  args.argument_lists = &argument_list;
  args.num_devices = 1;
  args.num_args = arguments.size();
  args.output_lists = &output_list;
  if (bound_device_ >= 0 && device.id() != bound_device_) {
    throw std::logic_error("Executable::Execute: compiled for device " +
                           std::to_string(bound_device_) + ", launched on device " +
                           std::to_string(device.id()));
  }
  // A bound executable runs on its compile-time device.
  args.execute_device = bound_device_ >= 0 ? nullptr : device.raw();
  PJRT_CALL(*plugin_, PJRT_LoadedExecutable_Execute, args);

  std::vector<std::shared_ptr<Buffer>> results;
  results.reserve(outputs.size());
  for (PJRT_Buffer* output : outputs) results.push_back(std::make_shared<Buffer>(plugin_, output));
  return results;
}

std::vector<std::vector<std::shared_ptr<Buffer>>> Executable::ExecuteReplicated(
    const std::vector<std::vector<PJRT_Buffer*>>& argument_lists) {
  const size_t num_args = argument_lists.empty() ? 0 : argument_lists[0].size();
  for (const auto& arguments : argument_lists) {
    if (arguments.size() != num_args)
      throw std::invalid_argument("ExecuteReplicated: every replica needs the same arguments");
  }
  std::vector<int64_t> non_donatable(num_args);
  for (size_t i = 0; i < num_args; ++i) non_donatable[i] = static_cast<int64_t>(i);
  auto options = MakeArgs<PJRT_ExecuteOptions>(PJRT_ExecuteOptions_STRUCT_SIZE);
  options.non_donatable_input_indices = non_donatable.data();
  options.num_non_donatable_input_indices = non_donatable.size();

  std::vector<PJRT_Buffer* const*> argument_pointers;
  std::vector<std::vector<PJRT_Buffer*>> outputs(argument_lists.size());
  std::vector<PJRT_Buffer**> output_pointers;
  for (size_t r = 0; r < argument_lists.size(); ++r) {
    argument_pointers.push_back(argument_lists[r].data());
    outputs[r].assign(num_outputs_, nullptr);
    output_pointers.push_back(outputs[r].data());
  }
  auto args = PJRT_ARGS(PJRT_LoadedExecutable_Execute);
  args.executable = executable_;
  args.options = &options;
  args.argument_lists = argument_pointers.data();
  args.num_devices = argument_lists.size();
  args.num_args = num_args;
  args.output_lists = output_pointers.data();
  args.execute_device = nullptr;  // the devices of the compile-time assignment
  PJRT_CALL(*plugin_, PJRT_LoadedExecutable_Execute, args);

  std::vector<std::vector<std::shared_ptr<Buffer>>> results(outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r) {
    for (PJRT_Buffer* output : outputs[r]) {
      results[r].push_back(std::make_shared<Buffer>(plugin_, output));
    }
  }
  return results;
}

std::string Executable::Serialize() const {
  auto get_args = PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable);
  get_args.loaded_executable = executable_;
  PJRT_CALL(*plugin_, PJRT_LoadedExecutable_GetExecutable, get_args);
  auto args = PJRT_ARGS(PJRT_Executable_Serialize);
  args.executable = get_args.executable;
  PJRT_Error* error = plugin_->HasEntry(offsetof(PJRT_Api, PJRT_Executable_Serialize))
                          ? plugin_->api()->PJRT_Executable_Serialize(&args)
                          : nullptr;
  std::string bytes;
  if (error == nullptr && args.serialized_bytes != nullptr) {
    bytes.assign(args.serialized_bytes, args.serialized_bytes_size);
    if (args.serialized_executable_deleter)
      args.serialized_executable_deleter(args.serialized_executable);
  }
  auto destroy_args = PJRT_ARGS(PJRT_Executable_Destroy);
  destroy_args.executable = get_args.executable;
  plugin_->api()->PJRT_Executable_Destroy(&destroy_args);
  plugin_->Check(error, "PJRT_Executable_Serialize");
  return bytes;
}

// ---- CompileOptions ----

namespace {

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void AppendIntField(std::string& out, int field, int64_t value) {
  AppendVarint(out, static_cast<uint64_t>(field) << 3);  // wire type 0: varint
  AppendVarint(out, static_cast<uint64_t>(value));
}

void AppendBytesField(std::string& out, int field, const std::string& bytes) {
  AppendVarint(out, (static_cast<uint64_t>(field) << 3) | 2);  // wire type 2: length-delimited
  AppendVarint(out, bytes.size());
  out += bytes;
}

// xla.DeviceAssignmentProto: replica_count = 1, computation_count = 2, computation_devices = 3,
// each a ComputationDevice whose replica_device_ids = 1 lists one device per replica.
std::string EncodeDeviceAssignment(const std::vector<int64_t>& replica_devices) {
  std::string computation;
  for (int64_t device : replica_devices) AppendIntField(computation, 1, device);
  std::string out;
  AppendIntField(out, 1, static_cast<int64_t>(replica_devices.size()));
  AppendIntField(out, 2, 1);
  AppendBytesField(out, 3, computation);
  return out;
}

}  // namespace

std::string EncodeCompileOptions(const CompileOptions& options) {
  const bool assigned = !options.device_assignment.empty();
  if (assigned && (options.num_partitions != 1 ||
                   options.device_assignment.size() != static_cast<size_t>(options.num_replicas))) {
    throw std::invalid_argument(
        "CompileOptions: a device assignment names one device per replica, with one partition");
  }
  // ExecutableBuildOptionsProto: device_ordinal = 1, num_replicas = 4, num_partitions = 5,
  // device_assignment = 9.
  std::string build;
  AppendIntField(build, 1, -1);
  AppendIntField(build, 4, options.num_replicas);
  AppendIntField(build, 5, options.num_partitions);
  if (assigned) AppendBytesField(build, 9, EncodeDeviceAssignment(options.device_assignment));
  // CompileOptionsProto: executable_build_options = 3, compile_portable_executable = 4.
  std::string out;
  AppendBytesField(out, 3, build);
  if (options.portable && !assigned) AppendIntField(out, 4, 1);
  return out;
}

// ---- Client ----

Client::Client(std::shared_ptr<Plugin> plugin, PJRT_Client* client)
    : plugin_(std::move(plugin)), client_(client) {}

std::shared_ptr<Client> Client::Create(std::shared_ptr<Plugin> plugin, int cpu_device_count) {
  std::vector<PJRT_NamedValue> create_options;
  static const char kDeviceCount[] = "cpu_device_count";
  if (cpu_device_count > 0) {
    auto value = MakeArgs<PJRT_NamedValue>(PJRT_NamedValue_STRUCT_SIZE);
    value.name = kDeviceCount;
    value.name_size = sizeof(kDeviceCount) - 1;
    value.type = PJRT_NamedValue_kInt64;
    value.int64_value = cpu_device_count;
    value.value_size = 1;
    create_options.push_back(value);
  }
  auto args = PJRT_ARGS(PJRT_Client_Create);
  args.create_options = create_options.data();
  args.num_options = create_options.size();
  try {
    PJRT_CALL(*plugin, PJRT_Client_Create, args);
  } catch (const PjrtError& error) {
    // Only XLA's CPU plugin takes a device count; the others (CUDA) reject unknown options. One
    // device is what the default asks for, so it is dropped; a count > 1 is the user's request.
    if (create_options.empty() || cpu_device_count > 1) throw;
    args = PJRT_ARGS(PJRT_Client_Create);
    PJRT_CALL(*plugin, PJRT_Client_Create, args);
  }
  auto client = std::shared_ptr<Client>(new Client(plugin, args.client));

  auto name_args = PJRT_ARGS(PJRT_Client_PlatformName);
  name_args.client = client->client_;
  PJRT_CALL(*plugin, PJRT_Client_PlatformName, name_args);
  client->platform_name_.assign(name_args.platform_name, name_args.platform_name_size);
  plugin->set_device_memory_is_host(client->platform_name_ == "cpu");
  auto version_args = PJRT_ARGS(PJRT_Client_PlatformVersion);
  version_args.client = client->client_;
  PJRT_CALL(*plugin, PJRT_Client_PlatformVersion, version_args);
  client->platform_version_.assign(version_args.platform_version,
                                   version_args.platform_version_size);

  auto devices_args = PJRT_ARGS(PJRT_Client_AddressableDevices);
  devices_args.client = client->client_;
  PJRT_CALL(*plugin, PJRT_Client_AddressableDevices, devices_args);
  for (size_t i = 0; i < devices_args.num_addressable_devices; ++i) {
    PJRT_Device* device = devices_args.addressable_devices[i];
    auto description_args = PJRT_ARGS(PJRT_Device_GetDescription);
    description_args.device = device;
    PJRT_CALL(*plugin, PJRT_Device_GetDescription, description_args);
    auto kind_args = PJRT_ARGS(PJRT_DeviceDescription_Kind);
    kind_args.device_description = description_args.device_description;
    PJRT_CALL(*plugin, PJRT_DeviceDescription_Kind, kind_args);
    // The global id, which device assignments name; a plugin without the entry uses the index.
    int64_t id = -1;
    if (plugin->HasEntry(offsetof(PJRT_Api, PJRT_DeviceDescription_Id))) {
      auto id_args = PJRT_ARGS(PJRT_DeviceDescription_Id);
      id_args.device_description = description_args.device_description;
      PJRT_CALL(*plugin, PJRT_DeviceDescription_Id, id_args);
      id = id_args.id;
    }
    client->devices_.emplace_back(device, static_cast<int>(i),
                                  std::string(kind_args.device_kind, kind_args.device_kind_size),
                                  id);
  }
  return client;
}

Client::~Client() {
  auto args = PJRT_ARGS(PJRT_Client_Destroy);
  args.client = client_;
  plugin_->api()->PJRT_Client_Destroy(&args);
}

std::shared_ptr<Buffer> Client::BufferFromHost(const void* data, ElementType type,
                                               const std::vector<int64_t>& dims,
                                               const Device& device) {
  auto args = PJRT_ARGS(PJRT_Client_BufferFromHostBuffer);
  args.client = client_;
  args.data = data;
  args.type = static_cast<PJRT_Buffer_Type>(type);
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = device.raw();
  PJRT_CALL(*plugin_, PJRT_Client_BufferFromHostBuffer, args);
  if (args.done_with_host_buffer != nullptr) Event(plugin_, args.done_with_host_buffer).Await();
  return std::make_shared<Buffer>(plugin_, args.buffer);
}

std::shared_ptr<Executable> Client::Compile(const std::string& mlir_text,
                                            const CompileOptions& options) {
  static const char kFormat[] = "mlir";
  auto program = MakeArgs<PJRT_Program>(PJRT_Program_STRUCT_SIZE);
  program.code = const_cast<char*>(mlir_text.data());
  program.code_size = mlir_text.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  const std::string encoded = EncodeCompileOptions(options);
  auto args = PJRT_ARGS(PJRT_Client_Compile);
  args.client = client_;
  args.program = &program;
  args.compile_options = encoded.data();
  args.compile_options_size = encoded.size();
  PJRT_CALL(*plugin_, PJRT_Client_Compile, args);
  return std::make_shared<Executable>(plugin_, args.executable);
}

std::shared_ptr<Executable> Client::Deserialize(const std::string& serialized) {
  auto args = PJRT_ARGS(PJRT_Executable_DeserializeAndLoad);
  args.client = client_;
  args.serialized_executable = serialized.data();
  args.serialized_executable_size = serialized.size();
  PJRT_CALL(*plugin_, PJRT_Executable_DeserializeAndLoad, args);
  return std::make_shared<Executable>(plugin_, args.loaded_executable);
}

}  // namespace torch_tpu::runtime
