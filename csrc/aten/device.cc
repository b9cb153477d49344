// The tpu device for PyTorch: allocator, device guard, generator and PrivateUse1 hooks.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include "aten/device_checks.h"
#include "aten/generator.h"
#include "aten/tpu_tensor.h"
#include "exec/context.h"
#include "exec/graph_release.h"
#include "exec/pending.h"

namespace torch_tpu::aten {

namespace {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

// When the last of an event's executions finished, stamped on the plugin's thread as each one
// finishes: the host may look much later (start.elapsed_time(end) after end.synchronize()).
struct CompletionStamp {
  std::mutex mutex;
  std::condition_variable all_stamped;
  int pending = 0;
  std::chrono::steady_clock::time_point last;
};

struct TpuEvent {
  std::vector<std::shared_ptr<runtime::Event>> executions;  // in flight when recorded
  std::shared_ptr<CompletionStamp> stamp;
  std::optional<std::chrono::steady_clock::time_point> completed;

  void Record(const std::vector<std::shared_ptr<runtime::Event>>& in_flight) {
    executions.clear();
    completed.reset();
    stamp = std::make_shared<CompletionStamp>();
    stamp->last = std::chrono::steady_clock::now();
    for (const auto& done : in_flight) {
      if (done->IsReady()) continue;
      {
        std::lock_guard<std::mutex> lock(stamp->mutex);
        ++stamp->pending;
      }
      done->OnReady([stamp = stamp] {
        std::lock_guard<std::mutex> lock(stamp->mutex);
        stamp->last = std::max(stamp->last, std::chrono::steady_clock::now());
        if (--stamp->pending == 0) stamp->all_stamped.notify_all();
      });
      executions.push_back(done);
    }
  }

  // True once every execution recorded has finished.
  bool Poll() {
    if (completed) return true;
    for (const auto& done : executions) {
      if (!done->IsReady()) return false;
    }
    if (stamp) {
      // Ready, so each callback has run or is about to.
      std::unique_lock<std::mutex> lock(stamp->mutex);
      stamp->all_stamped.wait(lock, [&] { return stamp->pending == 0; });
      completed = stamp->last;
    } else {
      completed = std::chrono::steady_clock::now();
    }
    executions.clear();
    return true;
  }
  std::chrono::steady_clock::time_point Wait() {
    if (!completed) exec::ReleaseRetiredGraphs();
    for (const auto& done : executions) done->Await();
    Poll();
    return *completed;
  }
};

constexpr int kMaxStreamDevices = 64;
constexpr uint32_t kStreamPoolSize = 32;

// This thread's current stream id per device.
std::array<c10::StreamId, kMaxStreamDevices>& CurrentStreamIds() {
  thread_local std::array<c10::StreamId, kMaxStreamDevices> ids{};
  return ids;
}

// A device without an index (torch.Stream("tpu")) is the current device.
c10::Device Resolved(c10::Device device) {
  return device.index() >= 0 ? device : c10::Device(kTpu, CurrentDeviceIndex());
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kTpu; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    setDevice(device);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kTpu, CurrentDeviceIndex()); }
  void setDevice(c10::Device device) const override {
    if (device.index() < 0) return;
    CheckDeviceIndex(device.index());
    SetCurrentDeviceIndex(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0) SetCurrentDeviceIndex(device.index());
  }
  // Streams are ids over the device's one in-order queue (see block()): the default stream is
  // 0, new streams come from a pool of kStreamPoolSize ids per device, round robin as CUDA's, and
  // the current stream is per thread and device.
  c10::Stream getStream(c10::Device device) const noexcept override {
    device = Resolved(device);
    return c10::Stream(c10::Stream::UNSAFE, device,
                       CurrentStreamIds()[device.index() % kMaxStreamDevices]);
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, Resolved(device));
  }
  c10::Stream getNewStream(c10::Device device, int) const override {
    device = Resolved(device);
    CheckDeviceIndex(device.index());
    static std::array<std::atomic<uint32_t>, kMaxStreamDevices> next{};
    const uint32_t slot = next[device.index() % kMaxStreamDevices]++ % kStreamPoolSize;
    return c10::Stream(c10::Stream::UNSAFE, device, static_cast<c10::StreamId>(slot + 1));
  }
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override {
    const c10::Device device = Resolved(stream.device());
    c10::StreamId& current = CurrentStreamIds()[device.index() % kMaxStreamDevices];
    const c10::StreamId previous = current;
    current = stream.id();
    return c10::Stream(c10::Stream::UNSAFE, device, previous);
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(exec::DeviceCount());
  }
  // torch.accelerator.get_device_capability: the dtypes tpu tensors can hold.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    CheckDeviceIndex(device.index() < 0 ? CurrentDeviceIndex() : device.index());
    c10::DeviceCapability capability;
#define TORCH_TPU_SET_SUPPORTED(_, name)                         \
  capability.capability_data.supported_scalar_types.has_##name = \
      IsSupportedDType(c10::ScalarType::name);
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TORCH_TPU_SET_SUPPORTED)
#undef TORCH_TPU_SET_SUPPORTED
    return capability;
  }
  // Events wait for the executions in flight when they were recorded; an event's completion
  // time is when the last of them finished (CompletionStamp), whenever the host asks.
  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (*event == nullptr) *event = new TpuEvent();
    auto* tpu_event = static_cast<TpuEvent*>(*event);
    Translate([] { exec::MaterializeAllPending("event record"); });
    tpu_event->Record(exec::InFlightExecutions());
    tpu_event->Poll();
  }
  // One queue per device, ordered by data dependencies: later work that reads a result
  // already waits for it, so there is nothing more to block on.
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* event) const override {
    return event == nullptr || Translate([&] { return static_cast<TpuEvent*>(event)->Poll(); });
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) Translate([&] { static_cast<TpuEvent*>(event)->Wait(); });
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    const auto begin = Translate([&] { return static_cast<TpuEvent*>(start)->Wait(); });
    const auto finish = Translate([&] { return static_cast<TpuEvent*>(end)->Wait(); });
    return std::chrono::duration<double, std::milli>(finish - begin).count();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  // Whether the work issued so far has finished (one queue: every stream's work). Fused mode's
  // pending work is issued work too: it is launched first, so a loop polling query() ends.
  bool queryStream(const c10::Stream&) const override {
    return Translate([] {
      exec::MaterializeAllPending("stream query");
      for (const auto& done : exec::InFlightExecutions()) {
        if (!done->IsReady()) return false;
      }
      return true;
    });
  }
  void synchronizeStream(const c10::Stream&) const override { SynchronizeDevice(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { SynchronizeDevice(); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

// Page-locked staging memory is not needed by PJRT's host copies, but `pin_memory()` must
// still give memory that `is_pinned()` recognizes, so the allocator records its blocks.
class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_[reinterpret_cast<uintptr_t>(data)] = nbytes;
    }
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }
  void copy_data(void* dst, const void* src, std::size_t count) const override {
    std::memcpy(dst, src, count);
  }
  bool Contains(const void* pointer) {
    const auto address = reinterpret_cast<uintptr_t>(pointer);
    std::lock_guard<std::mutex> lock(mutex_);
    auto block = blocks_.upper_bound(address);
    if (block == blocks_.begin()) return false;
    --block;
    return address < block->first + block->second;
  }
  static PinnedHostAllocator& Get() {
    static auto* allocator = new PinnedHostAllocator();
    return *allocator;
  }

 private:
  static void Delete(void* data) {
    {
      PinnedHostAllocator& self = Get();
      std::lock_guard<std::mutex> lock(self.mutex_);
      self.blocks_.erase(reinterpret_cast<uintptr_t>(data));
    }
    c10::free_cpu(data);
  }
  std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;
};

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return exec::IsAvailable(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return DefaultGenerator(device_index < 0 ? CurrentDeviceIndex() : device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<TpuGenerator>(device_index < 0 ? CurrentDeviceIndex() : device_index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    const std::optional<c10::DeviceIndex> device = DeviceOfAddress(data);
    TORCH_CHECK(device.has_value(), "pointer ", data, " was not allocated on a tpu device");
    return c10::Device(kTpu, *device);
  }
  bool isPinnedPtr(const void* data) const override {
    return PinnedHostAllocator::Get().Contains(data);
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &PinnedHostAllocator::Get(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return exec::IsInitialized(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(exec::DeviceCount());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    CheckDeviceIndex(device);
    SetCurrentDeviceIndex(device);
  }
  c10::DeviceIndex getCurrentDevice() const override { return CurrentDeviceIndex(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = CurrentDeviceIndex();
    setCurrentDevice(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    GrowStorage(storage, newsize);
    storage.unsafeGetStorageImpl()->set_nbytes(newsize);
  }
};

}  // namespace

void SynchronizeDevice() {
  Translate([] {
    exec::MaterializeAllPending("synchronize");
    exec::AwaitExecutions();
  });
  RaiseFailedDeviceChecks();
}

// ---- Generator ----

TpuGenerator::TpuGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(kTpu, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
void TpuGenerator::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t TpuGenerator::get_offset() const { return offset_; }
uint64_t TpuGenerator::current_seed() const { return seed_; }
uint64_t TpuGenerator::seed() {
  uint64_t random = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(random);
  return random;
}

// State layout: seed (8 bytes) then offset (8 bytes), as a CPU uint8 tensor.
void TpuGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.numel() == 16 && new_state.dtype() == at::kByte,
              "tpu RNG state must be a uint8 tensor of 16 bytes, got ", new_state.numel(),
              " elements");
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, bytes, 8);
  std::memcpy(&offset_, bytes + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<uint8_t*>(state.data_ptr()) + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> TpuGenerator::NextKey() {
  std::lock_guard<std::mutex> lock(mutex_);
  return {seed_, offset_++};
}

TpuGenerator* TpuGenerator::clone_impl() const {
  auto* copy = new TpuGenerator(device().index());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& DefaultGenerator(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::vector<at::Generator> generators;
  std::lock_guard<std::mutex> lock(mutex);
  if (generators.empty()) {
    const int count = std::max(exec::DeviceCount(), 1);
    for (int i = 0; i < count; ++i) {
      generators.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(i)));
      generators.back().set_current_seed(67280421310721ull);  // PyTorch's default seed
    }
  }
  CheckDeviceIndex(device);
  return generators.at(device);
}

void RegisterDeviceHooks() {
  static TpuHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
}

}  // namespace torch_tpu::aten
