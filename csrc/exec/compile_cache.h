// Compiled programs, cached in memory (shared futures: one compile per signature, however many
// threads ask) and on disk (serialized executables keyed by signature, plugin identity and this
// extension's identity).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "runtime/pjrt.h"

namespace torch_tpu::exec {

// The plugin's identity: a hash of its file and its API version, memoised in the cache dir.
std::string PluginIdentity();
// This extension's identity, a hash of its file: a disk-cache entry holds a program as this
// build lowered it, and another build (a fixed lowering, a changed form) must not load it, since
// a program's signature covers its ops, not how they are lowered.
std::string ExtensionIdentity();

// Returns the executable for `signature`; `print` produces the StableHLO text on a miss.
std::shared_ptr<runtime::Executable> GetExecutable(const ir::Signature& signature,
                                                   const std::function<std::string()>& print);
// The same, compiled with `options`; the signature must already tell these options apart.
std::shared_ptr<runtime::Executable> GetExecutable(const ir::Signature& signature,
                                                   const std::function<std::string()>& print,
                                                   const runtime::CompileOptions& options);

// The executable for `signature` to launch on `device`. For the first device it is compiled for
// that device alone, whose launches cost the plugin less (runtime::Executable::BindToDevice);
// other devices share one portable executable.
std::shared_ptr<runtime::Executable> GetExecutableFor(const ir::Signature& signature,
                                                      const std::function<std::string()>& print,
                                                      const runtime::Device& device);

// Writes `text` to the dump directory and returns the path.
std::string DumpProgram(const ir::Signature& signature, const std::string& text);

// Drops the in-memory cache (tests use it to force disk lookups).
void ClearMemoryCache();

}  // namespace torch_tpu::exec
