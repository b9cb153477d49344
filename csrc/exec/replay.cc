#include "exec/replay.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "exec/storage.h"

namespace torch_tpu::exec {

namespace {

// Replaying is quadratic in the ops (each replay recomputes what the op reads): past this many
// ops the error keeps only the program's path.
constexpr size_t kMaxReplayedOps = 512;

// Each node's results as Values, found through the edges that hold them.
std::unordered_map<const ir::Node*, std::shared_ptr<ir::Node>> Owners(const ir::Program& program) {
  std::unordered_map<const ir::Node*, std::shared_ptr<ir::Node>> owners;
  for (const ir::Value& result : program.results) owners.emplace(result.node.get(), result.node);
  for (const ir::Node* node : program.nodes) {
    for (const ir::Value& operand : node->operands) {
      owners.emplace(operand.node.get(), operand.node);
    }
  }
  return owners;
}

}  // namespace

std::string FailingOrigin(const ir::Program& program, int device_index) {
  // Consecutive nodes with one origin are one recorded op.
  std::vector<std::vector<const ir::Node*>> ops;
  for (const ir::Node* node : program.nodes) {
    if (ops.empty() || ops.back().back()->origin != node->origin) ops.emplace_back();
    ops.back().push_back(node);
  }
  // A program of one recorded op (a custom kernel alone in a fused program) failed as that op.
  if (ops.size() == 1 && ops[0].front()->origin) return *ops[0].front()->origin;
  if (ops.size() < 2 || ops.size() > kMaxReplayedOps) return {};
  const auto owners = Owners(program);
  for (const auto& op : ops) {
    std::vector<ir::Value> results;
    for (const ir::Node* node : op) {
      auto owner = owners.find(node);
      if (owner == owners.end()) continue;
      for (size_t i = 0; i < node->results.size(); ++i) {
        results.push_back(ir::Value{owner->second, static_cast<int>(i)});
      }
    }
    if (results.empty()) continue;
    ir::Program replay = ir::BuildProgram(results);
    // A buffer the failed run consumed (donated to it) cannot be read again: its readers are
    // not replayed.
    const bool reads_consumed = std::any_of(
        replay.parameters.begin(), replay.parameters.end(),
        [](const ir::Node* parameter) { return ParameterBuffer(parameter)->donated(); });
    if (reads_consumed) continue;
    try {
      const std::vector<bool> donated(replay.parameters.size() + replay.scalar_packs.size(), false);
      for (const auto& output : RunProgram(replay, donated, device_index, "replay"))
        output->AwaitReady();
    } catch (const std::exception& e) {
      const std::string* origin = op.front()->origin.get();
      return (origin != nullptr ? *origin : std::string("a copy between tensor views")) +
             " (replayed alone: " + e.what() + ")";
    }
  }
  return {};
}

}  // namespace torch_tpu::exec
