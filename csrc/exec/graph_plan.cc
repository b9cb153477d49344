#include "exec/graph_plan.h"

#include <algorithm>
#include <unordered_map>

#include "exec/compile_cache.h"
#include "exec/context.h"
#include "exec/pending.h"
#include "exec/profile.h"
#include "exec/scalar_upload.h"

namespace torch_tpu::exec {

namespace {
thread_local GraphCapture* g_active_capture = nullptr;

int IndexOf(const std::vector<DeviceStorage*>& storages, const DeviceStorage* storage) {
  auto found = std::find(storages.begin(), storages.end(), storage);
  return found == storages.end() ? -1 : static_cast<int>(found - storages.begin());
}
}  // namespace

GraphCapture* ActiveGraphCapture() { return g_active_capture; }

GraphCapture::GraphCapture(std::vector<DeviceStorage*> inputs)
    : inputs_(std::move(inputs)), previous_(g_active_capture) {
  g_active_capture = this;
  // Work pending from before the graph (fused mode) would join its cut: not the graph's program.
  usable_ = PendingCount() == 0;
  for (DeviceStorage* storage : inputs_) {
    // A pending input is not a buffer yet. A never-written one (read as zeros, not a parameter)
    // is fine: a replay requires it to be unwritten again (python/compiled_graph.cc). A padded
    // (growing) input's buffer is longer than the storage: not a fixed parameter type.
    usable_ = usable_ && !storage->pending() && !storage->padded();
    input_buffers_.push_back(storage->buffer().get());
  }
}

GraphCapture::~GraphCapture() { g_active_capture = previous_; }

void GraphCapture::OnCut(const ir::Program& program, const std::vector<DeviceStorage*>& targets) {
  if (++cuts_ > 1 || !usable_) return;
  GraphPlan plan;
  plan.device = targets.front()->device();
  plan.signature = ir::ComputeSignature(program, 0);
  plan.ops = program.nodes.size();
  const runtime::Device& device = GetDevice(plan.device);
  plan.executable =
      GetExecutableFor(plan.signature, [&] { return ir::PrintProgram(program); }, device);
  for (const ir::Node* parameter : program.parameters) {
    auto found = std::find(input_buffers_.begin(), input_buffers_.end(), parameter->buffer.get());
    if (found == input_buffers_.end()) {
      usable_ = false;  // a buffer the graph's inputs do not provide
      return;
    }
    plan.parameter_input.push_back(static_cast<int>(found - input_buffers_.begin()));
  }
  for (const ir::ScalarPack& pack : program.scalar_packs) {
    plan.scalar_dtypes.push_back(pack.dtype);
    plan.scalar_bytes.push_back(ScalarPackBytes(pack));
    plan.scalar_buffers.push_back(UploadScalars(plan.scalar_bytes.back(), pack.dtype, device));
  }
  plan.aliased_parameter.assign(targets.size(), -1);
  for (size_t p = 0; p < program.aliased_result.size(); ++p) {
    if (program.aliased_result[p] >= 0) {
      plan.aliased_parameter[program.aliased_result[p]] = static_cast<int>(p);
    }
  }
  for (size_t r = 0; r < targets.size(); ++r) {
    plan.result_input.push_back(IndexOf(inputs_, targets[r]));
    plan.result_dtype.push_back(program.results[r].dtype());
    plan.result_nbytes.push_back(targets[r]->nbytes());
  }
  targets_ = targets;
  plan_ = std::move(plan);
}

std::optional<GraphPlan> GraphCapture::Finish(std::vector<DeviceStorage*>* result_storages) {
  if (!usable_ || cuts_ > 1) return std::nullopt;
  if (cuts_ == 0) {  // nothing to run: the outputs are views of the inputs
    if (!draws_.empty()) return std::nullopt;  // a draw outside any program (not replayable)
    return GraphPlan{};
  }
  *result_storages = targets_;
  plan_->draws = std::move(draws_);
  return std::move(plan_);
}

std::vector<std::shared_ptr<runtime::Buffer>> RunGraphPlan(
    const GraphPlan& plan, const std::vector<DeviceStorage*>& inputs,
    const std::vector<std::shared_ptr<runtime::Buffer>>* scalar_buffers) {
  if (!plan.executable) return {};
  // Donation decides on use counts that another thread's Read or cut could change meanwhile.
  const auto lock = LockStorages();
  if (scalar_buffers == nullptr) scalar_buffers = &plan.scalar_buffers;
  std::vector<PJRT_Buffer*> arguments;
  arguments.reserve(plan.parameter_input.size() + scalar_buffers->size());
  for (int input : plan.parameter_input) arguments.push_back(inputs[input]->buffer()->raw());
  for (const auto& scalars : *scalar_buffers) arguments.push_back(scalars->raw());
  // An overwritten input's old buffer becomes its new value when nothing else holds it.
  std::vector<bool> donated(arguments.size(), false);
  for (size_t r = 0; r < plan.result_input.size(); ++r) {
    const int parameter = plan.aliased_parameter[r];
    if (parameter >= 0 && plan.result_input[r] >= 0 &&
        inputs[plan.parameter_input[parameter]]->OwnsBufferAlone()) {
      donated[parameter] = true;
    }
  }
  Metrics& metrics = GetMetrics();
  std::vector<std::shared_ptr<runtime::Buffer>> outputs =
      ExecuteProfiled(*plan.executable, arguments, donated, GetDevice(plan.device), plan.signature,
                      plan.ops, kCompiledGraphReason);
  metrics.executions++;
  metrics.compiled_graph_executions++;
  for (size_t p = 0; p < plan.parameter_input.size(); ++p) {
    if (!donated[p]) continue;
    inputs[plan.parameter_input[p]]->buffer()->MarkDonated();
    metrics.donated_buffers++;
  }
  for (size_t r = 0; r < outputs.size(); ++r) {
    if (plan.result_input[r] >= 0) {
      inputs[plan.result_input[r]]->SetBuffer(outputs[r], plan.result_dtype[r]);
    }
  }
  NoteLaunched(outputs);
  return outputs;
}

}  // namespace torch_tpu::exec
