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
// XLA's own loops keep a reduction on one core and reduce a row one element at a time; YNNPACK's
// kernels measured 3.5x faster on a 2048x2048 sum, and a compiled LM training step 15% faster.
class ScopedCpuXlaFlags {
 public:
  explicit ScopedCpuXlaFlags(bool apply);
  ~ScopedCpuXlaFlags();
  ScopedCpuXlaFlags(const ScopedCpuXlaFlags&) = delete;
  ScopedCpuXlaFlags& operator=(const ScopedCpuXlaFlags&) = delete;

 private:
  bool applied_ = false;
  bool had_value_ = false;
  std::string previous_;
};

// XLA_FLAGS as the plugin's client read it: part of the disk cache's identity, since the flags
// change the programs compiled. "" before a client exists or when the variable was unset.
std::string XlaFlagsAtClientCreation();

}  // namespace torch_tpu::runtime
