#include "runtime/buffer_release.h"

#include <mutex>
#include <utility>
#include <vector>

#include "pjrt_c_api.h"
#include "runtime/pjrt.h"

namespace torch_tpu::runtime {
namespace {

// A loop that never synchronizes still bounds the retired handles: the oldest half goes once
// there are this many (their programs have long run, so destroying them does not wait).
constexpr size_t kMaxRetired = 4096;

using Handle = std::pair<std::shared_ptr<Plugin>, PJRT_Buffer*>;

struct Retired {
  std::mutex mutex;
  std::vector<Handle> handles;
};

Retired& GetRetired() {
  static Retired* retired = new Retired();  // leaked: buffers are dropped in static destruction
  return *retired;
}

}  // namespace

void DestroyBuffer(const Plugin& plugin, PJRT_Buffer* buffer) {
  PJRT_Buffer_Destroy_Args args{};
  args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  args.buffer = buffer;
  try {
    plugin.Check(plugin.api()->PJRT_Buffer_Destroy(&args), "PJRT_Buffer_Destroy");
  } catch (const PjrtError&) {
  }
}

void RetireDonatedBuffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer) {
  std::vector<Handle> oldest;
  {
    Retired& retired = GetRetired();
    std::lock_guard<std::mutex> lock(retired.mutex);
    retired.handles.emplace_back(std::move(plugin), buffer);
    if (retired.handles.size() < kMaxRetired) return;
    const auto half = retired.handles.begin() + kMaxRetired / 2;
    oldest.assign(std::make_move_iterator(retired.handles.begin()), std::make_move_iterator(half));
    retired.handles.erase(retired.handles.begin(), half);
  }
  for (const Handle& handle : oldest) DestroyBuffer(*handle.first, handle.second);
}

void DestroyRetiredBuffers() {
  std::vector<Handle> handles;
  {
    Retired& retired = GetRetired();
    std::lock_guard<std::mutex> lock(retired.mutex);
    handles.swap(retired.handles);
  }
  for (const Handle& handle : handles) DestroyBuffer(*handle.first, handle.second);
}

}  // namespace torch_tpu::runtime
