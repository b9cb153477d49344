#include "runtime/buffer_release.h"

#include <utility>
#include <vector>

#include "pjrt_c_api.h"
#include "runtime/pjrt.h"
#include "runtime/retired_list.h"

namespace torch_tpu::runtime {
namespace {

// A loop that never synchronizes still bounds the retired handles: the oldest half goes once
// there are this many (their programs have long run, so destroying them does not wait).
constexpr size_t kMaxRetired = 4096;

using Handle = std::pair<std::shared_ptr<Plugin>, PJRT_Buffer*>;

RetiredList<Handle>& GetRetired() {
  // Leaked: buffers are dropped in static destruction.
  static auto* retired = new RetiredList<Handle>(kMaxRetired);
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
  for (const Handle& handle : GetRetired().Add({std::move(plugin), buffer})) {
    DestroyBuffer(*handle.first, handle.second);
  }
}

void DestroyRetiredBuffers() {
  for (const Handle& handle : GetRetired().TakeAll()) DestroyBuffer(*handle.first, handle.second);
}

}  // namespace torch_tpu::runtime
