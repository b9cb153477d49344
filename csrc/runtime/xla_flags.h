// XLA reads its compiler flags from the XLA_FLAGS environment variable once, when a plugin's
// client is created. torch_tpu sets a default of its own there for XLA's CPU plugin, for that
// moment only, so that other XLA builds in the process (JAX's) never see it.
#pragma once

#include <string>

namespace torch_tpu::runtime {

// Whether `path` is XLA's CPU plugin as the xla-cpu-pjrt package ships it.
bool IsXlaCpuPlugin(const std::string& path);

// While alive: XLA_FLAGS with the CPU defaults appended, for each flag the user's XLA_FLAGS does
// not name (a user's own value wins). Restores the variable as it was.
//
// The default: reductions run as YNNPACK fusions, beside the dots, which run there by default.
// A 2048x2048 f32 sum measured 0.72 ms in XLA's own reduction loop and 0.18-0.24 ms on YNNPACK
// (torch's CPU kernel: 0.13); the 2-layer LM training step gained 2-6% (its reductions are
// small). setenv is not thread-safe: this runs once, under the client lock, before any program.
class ScopedCpuXlaFlags {
 public:
  explicit ScopedCpuXlaFlags(bool apply);
  ~ScopedCpuXlaFlags();
  ScopedCpuXlaFlags(const ScopedCpuXlaFlags&) = delete;
  ScopedCpuXlaFlags& operator=(const ScopedCpuXlaFlags&) = delete;

  // XLA_FLAGS as the plugin reads it while this is alive ("" when unset).
  const std::string& flags() const { return flags_; }

 private:
  bool applied_ = false;
  bool had_value_ = false;
  std::string previous_;
  std::string flags_;
};

}  // namespace torch_tpu::runtime
