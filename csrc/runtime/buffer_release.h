#pragma once

#include <memory>

struct PJRT_Buffer;

namespace torch_tpu::runtime {

class Plugin;

// Destroying the handle of a donated buffer waits until the program it was donated to has run
// (the plugin holds the donation until then), so dropping the last reference right after a launch
// (a fused step's old parameters) would stall the host for the whole program. Such handles own no
// memory any more (the program's results do), so they are kept and destroyed later, when
// everything launched has run.
void RetireDonatedBuffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer);

// Destroys the retired handles; call when every launched program has run, so none waits.
void DestroyRetiredBuffers();

// Destroys a handle now, reporting nothing: there is nobody left to tell.
void DestroyBuffer(const Plugin& plugin, PJRT_Buffer* buffer);

}  // namespace torch_tpu::runtime
