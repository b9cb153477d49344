// A torch.compile graph's program, run directly. The first call of a graph records its ops and
// cuts them into one program like fused eager; a GraphCapture watches that cut and keeps what is
// needed to run the program again without recording: which input storage feeds each parameter,
// which input storage each result overwrites, and the scalar parameters (uploaded once). Later
// calls with inputs of the same layout then cost one launch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "exec/storage.h"
#include "ir/graph.h"
#include "runtime/pjrt.h"

namespace torch_tpu::exec {

// A random op's draw from its generator while the graph was recorded. A replay draws again from
// the same generator in the same order, so the generator advances as in eager mode, and puts the
// new key where the recorded one was among the scalar parameters (python/compiled_graph.cc).
struct RandomDraw {
  std::function<std::pair<uint64_t, uint64_t>()> next_key;  // (seed, offset), advancing it
  uint64_t seed = 0, offset = 0;                            // what the recording drew
};

struct GraphPlan {
  std::shared_ptr<runtime::Executable> executable;
  ir::Signature signature;  // the program's, and its op count: for the profiler
  size_t ops = 0;
  int device = 0;
  std::vector<int> parameter_input;  // per program parameter: the input storage it reads
  std::vector<std::shared_ptr<runtime::Buffer>> scalar_buffers;  // per scalar pack
  std::vector<ir::DType> scalar_dtypes;                          // per scalar pack
  std::vector<std::vector<uint8_t>> scalar_bytes;                // per scalar pack, as uploaded
  std::vector<RandomDraw> draws;                                 // in the order they were drawn
  std::vector<int> result_input;  // per result: the input storage it overwrites, or -1 (new)
  std::vector<ir::DType> result_dtype;
  std::vector<size_t> result_nbytes;
  std::vector<int> aliased_parameter;  // per result: the parameter donated to it, or -1
};

// Watches the cuts made on this thread while it lives (normally exactly one: the graph's).
class GraphCapture {
 public:
  // `inputs`: the storages of the graph's tpu inputs (repeats allowed), before the call.
  explicit GraphCapture(std::vector<DeviceStorage*> inputs);
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  // Called by Materialize for each cut while the capture is active.
  void OnCut(const ir::Program& program, const std::vector<DeviceStorage*>& targets);
  // Called by each random op the graph records, with the key it drew.
  void NoteRandomDraw(RandomDraw draw) { draws_.push_back(std::move(draw)); }
  // The plan, or nothing when the graph cannot be replayed directly (several cuts, a parameter
  // that is not an input, an input that was pending). `result_storages` receives the storage
  // each result was written to.
  std::optional<GraphPlan> Finish(std::vector<DeviceStorage*>* result_storages);

 private:
  std::vector<DeviceStorage*> inputs_;
  std::vector<const void*> input_buffers_;  // each input's buffer before the call
  bool usable_ = true;
  int cuts_ = 0;
  std::optional<GraphPlan> plan_;
  std::vector<RandomDraw> draws_;
  std::vector<DeviceStorage*> targets_;
  GraphCapture* previous_;
};

// Runs the plan over the current call's input storages (same layout as when captured), installs
// the results that overwrite inputs, and returns every result's buffer. Inputs must be
// materialized; nothing may be pending.
// `scalar_buffers`, when given, replace the plan's (its random keys drawn anew).
std::vector<std::shared_ptr<runtime::Buffer>> RunGraphPlan(
    const GraphPlan& plan, const std::vector<DeviceStorage*>& inputs,
    const std::vector<std::shared_ptr<runtime::Buffer>>* scalar_buffers = nullptr);

GraphCapture* ActiveGraphCapture();

}  // namespace torch_tpu::exec
