#include "runtime/xla_flags.h"

#include <cstdlib>

namespace torch_tpu::runtime {

namespace {

// The flags appended for XLA's CPU plugin, with their values.
struct CpuDefault {
  const char* flag;
  const char* value;
};
constexpr CpuDefault kCpuDefaults[] = {
    {"xla_cpu_experimental_ynn_fusion_type",
     "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"},
};

}  // namespace

bool IsXlaCpuPlugin(const std::string& path) {
  const std::string name = "xla_cpu_pjrt.so";
  return path.size() >= name.size() &&
         path.compare(path.size() - name.size(), name.size(), name) == 0;
}

ScopedCpuXlaFlags::ScopedCpuXlaFlags(bool apply) {
  const char* value = std::getenv("XLA_FLAGS");
  had_value_ = value != nullptr;
  previous_ = had_value_ ? value : "";
  flags_ = previous_;
  if (!apply) return;
  for (const CpuDefault& entry : kCpuDefaults) {
    if (previous_.find(entry.flag) != std::string::npos) continue;
    flags_ += std::string(flags_.empty() ? "--" : " --") + entry.flag + "=" + entry.value;
  }
  applied_ = flags_ != previous_;
  if (applied_) setenv("XLA_FLAGS", flags_.c_str(), 1);
}

ScopedCpuXlaFlags::~ScopedCpuXlaFlags() {
  if (!applied_) return;
  if (had_value_)
    setenv("XLA_FLAGS", previous_.c_str(), 1);
  else
    unsetenv("XLA_FLAGS");
}

}  // namespace torch_tpu::runtime
