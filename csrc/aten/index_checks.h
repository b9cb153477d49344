// Index bounds. XLA's gather and scatter clamp an index out of range into range (a read) or drop
// it (a write), and a loss that compares classes with its targets takes an unknown class as none,
// where the CPU raises and CUDA trips a device-side assert. Two checks raise the CPU's error:
// - debug mode (blocking, errors at their source) reads the index tensors back at the op;
// - the other modes record, beside each such op, a value the device computes with the op (its
//   first index out of range, if any, and that index's position), and read those back at the next
//   synchronization (a host read, synchronize), as CUDA reports a device-side assert. No index
//   tensor is read back.
// Inside deferred scopes (a compiled graph's trace, an optimizer step) the indices may not exist
// yet, so debug mode checks there on the device too. A compiled graph's plan, which launches its
// program again without recording, reports its checks' new values like recorded ones.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/lowering.h"

namespace torch_tpu::exec {
class DeviceStorage;
}

namespace torch_tpu::aten {

// Whether the op (by its lowering's name) is one whose indices these checks cover.
bool IsIndexedOp(const std::string& lowering_name);

// Raises the CPU's error when an index argument of the op (by its lowering's name) is out of
// range; nothing outside debug mode or for other ops.
void CheckIndicesInDebugMode(const std::string& lowering_name, const c10::FunctionSchema& schema,
                             const c10::Stack& args);

// Outside debug mode: records the device-side check of the op's index arguments, from the values
// its lowering read (`ctx.args[j]` is schema argument `schema_index[j]`), into a new storage that
// joins `written`, so that it runs in the op's program. Nothing for other ops.
void RecordDeviceIndexChecks(const c10::OperatorHandle& op, const c10::Stack& args,
                             const std::vector<size_t>& schema_index,
                             const ops::LoweringContext& ctx,
                             std::vector<exec::DeviceStorage*>& written);

// What a failed check reports: the op's error, the dim and size it names, and the op's site.
struct IndexCheckReport;

// The checks recorded on this thread while a compiled graph was captured (exec/graph_plan.h) since
// the last call: each one's storage, which the graph's program writes, and its report.
std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const IndexCheckReport>>>
TakeCapturedIndexChecks();

// A check's new value (an i64 [2] tpu tensor, ops::OutOfRangeIndex) from a replay of a compiled
// graph's program, read back and reported like a recorded check.
void AddIndexCheck(at::Tensor value, std::shared_ptr<const IndexCheckReport> report);

// Reads back the checks whose programs have been launched (waiting for them) and raises the first
// one that found an index out of range, with the CPU's error and the op's site; the checks it read
// are done with either way. Checks still pending in fused mode wait for a later call.
void RaiseFailedIndexChecks();

}  // namespace torch_tpu::aten
