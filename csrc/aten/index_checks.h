// Index bounds in debug mode. An index out of range reads a clamped position and a write through
// one is dropped: XLA's gather and scatter semantics, as on PyTorch/XLA, where the CPU raises and
// CUDA trips a device-side assert. Checking every index op would read each index tensor back to
// the host, so only debug mode (blocking, errors at their source) checks them: it raises the
// CPU's own error at the op.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace torch_tpu::aten {

// Raises the CPU's error when an index argument of the op (by its lowering's name) is out of
// range; nothing outside debug mode or for other ops.
void CheckIndicesInDebugMode(const std::string& lowering_name, const c10::FunctionSchema& schema,
                             const c10::Stack& args);

}  // namespace torch_tpu::aten
