#include "exec/graph_release.h"

#include <utility>

#include "runtime/retired_list.h"

namespace torch_tpu::exec {
namespace {

using Graph = std::vector<ir::Value>;

// Past this many (about a training step's cuts), the oldest half is freed at once: a graph can
// hold the buffers of inputs whose tensors are gone.
constexpr size_t kMaxRetiredGraphs = 4;

runtime::RetiredList<Graph>& GetRetired() {
  // Leaked: nodes may hold the plugin's buffers.
  static auto* retired = new runtime::RetiredList<Graph>(kMaxRetiredGraphs);
  return *retired;
}

}  // namespace

// The graphs given back are freed as each statement ends, outside the list's lock.
void RetireGraph(std::vector<ir::Value> results) { GetRetired().Add(std::move(results)); }

void ReleaseRetiredGraphs() { GetRetired().TakeAll(); }

}  // namespace torch_tpu::exec
