#include "runtime/xla_flags.h"

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_tpu::runtime {

namespace {

// (flag, value) pairs appended for XLA's CPU plugin.
const std::vector<std::pair<std::string, std::string>>& CpuDefaults() {
  static const std::vector<std::pair<std::string, std::string>> defaults = {
      {"xla_cpu_experimental_ynn_fusion_type",
       "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"},
  };
  return defaults;
}

std::mutex g_mutex;
std::string g_seen;  // guarded by g_mutex

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
  std::string flags = previous_;
  if (apply) {
    for (const auto& [flag, default_value] : CpuDefaults()) {
      if (previous_.find(flag) != std::string::npos) continue;
      flags += (flags.empty() ? "--" : " --") + flag + "=" + default_value;
    }
    applied_ = flags != previous_;
    if (applied_) setenv("XLA_FLAGS", flags.c_str(), 1);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_seen = flags;
}

ScopedCpuXlaFlags::~ScopedCpuXlaFlags() {
  if (!applied_) return;
  if (had_value_)
    setenv("XLA_FLAGS", previous_.c_str(), 1);
  else
    unsetenv("XLA_FLAGS");
}

std::string XlaFlagsAtClientCreation() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_seen;
}

}  // namespace torch_tpu::runtime
