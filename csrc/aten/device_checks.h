// Device-side checks: what CUDA reports as a device-side assert, and the CPU raises at the op.
// - Index bounds. XLA's gather and scatter clamp an index out of range into range (a read) or
//   drop it (a write), and a loss that compares classes with its targets takes an unknown class
//   as none.
// - Value domains: binary_cross_entropy's input and target, bernoulli's p, multinomial's
//   probabilities, normal's std, which a lowering would take as they are.
// - Data ranges: histc's and histogram's range, when taken from the data, must be finite.
// - Counts: masked_scatter's mask may not select more elements than its source holds (a gather
//   would repeat the last one).
// Each such op records, beside itself and in its own program, an i64 [2] the device computes from
// its arguments: the first bad element (an index's value, or 0) and its position, or
// ops::kNoIndexOutOfRange in both. The next synchronization (a host read, synchronize) reads these
// back and raises the CPU's error, naming the op and its line; no argument is read back. Debug
// mode (blocking, errors at their source) runs the op's checks first and raises at the op, before
// its results are written, except inside deferred scopes (a compiled graph's trace, an optimizer
// step), whose arguments may not exist yet. A compiled graph's plan, which launches its program
// again without recording, reports its checks' new values like recorded ones.
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

// Whether the op (by its lowering's name) is one that these checks cover.
bool IsCheckedOp(const std::string& lowering_name);

// Records the op's checks, from the argument values its lowering read (`ctx.args[j]` is schema
// argument `schema_index[j]`), each into a new storage that joins `written`, so that it runs in the
// op's program. Debug mode outside deferred scopes runs them at once instead and raises the first
// failure. Nothing for other ops. Called before the op's results are written.
void RecordDeviceChecks(const c10::OperatorHandle& op, const c10::Stack& args,
                        const std::vector<size_t>& schema_index, const ops::LoweringContext& ctx,
                        std::vector<exec::DeviceStorage*>& written);

// What a failed check reports: the op's error, the dim and size it names, and the op's site.
struct DeviceCheckReport;

// The checks recorded on this thread while a compiled graph was captured (exec/graph_plan.h) since
// the last call: each one's storage, which the graph's program writes, and its report.
std::vector<std::pair<exec::DeviceStorage*, std::shared_ptr<const DeviceCheckReport>>>
TakeCapturedDeviceChecks();

// A check's new value (the storage of an i64 [2], ops::OutOfRangeIndex) from a replay of a
// compiled graph's program, read back and reported like a recorded check.
void AddDeviceCheck(c10::Storage value, std::shared_ptr<const DeviceCheckReport> report);

// While alive, the data-range check of histogram on this thread names dimension `dim` of the
// points: histogramdd's bin edges are histogram's over one dimension's column at a time.
class ScopedHistogramDimension {
 public:
  explicit ScopedHistogramDimension(int64_t dim);
  ~ScopedHistogramDimension();
  ScopedHistogramDimension(const ScopedHistogramDimension&) = delete;
  ScopedHistogramDimension& operator=(const ScopedHistogramDimension&) = delete;

 private:
  int64_t previous_;
};

// Reads back the checks whose programs have been launched (waiting for them) and raises the first
// one that found an index out of range, with the CPU's error and the op's site; the checks it read
// are done with either way. Checks still pending in fused mode wait for a later call.
void RaiseFailedDeviceChecks();

}  // namespace torch_tpu::aten
