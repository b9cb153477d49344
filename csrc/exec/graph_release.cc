#include "exec/graph_release.h"

#include <mutex>
#include <utility>

namespace torch_tpu::exec {
namespace {

// Past this many (about a training step's cuts), the oldest half is freed at once: a graph can
// hold the buffers of inputs whose tensors are gone.
constexpr size_t kMaxRetiredGraphs = 4;

struct Retired {
  std::mutex mutex;
  std::vector<std::vector<ir::Value>> graphs;
};

Retired& GetRetired() {
  static Retired* retired = new Retired();  // leaked: nodes may hold buffers of the plugin's
  return *retired;
}

}  // namespace

void RetireGraph(std::vector<ir::Value> results) {
  std::vector<std::vector<ir::Value>> oldest;  // freed after the lock is released
  Retired& retired = GetRetired();
  std::lock_guard<std::mutex> lock(retired.mutex);
  retired.graphs.push_back(std::move(results));
  if (retired.graphs.size() <= kMaxRetiredGraphs) return;
  const auto half = retired.graphs.begin() + kMaxRetiredGraphs / 2;
  oldest.assign(std::make_move_iterator(retired.graphs.begin()), std::make_move_iterator(half));
  retired.graphs.erase(retired.graphs.begin(), half);
}

void ReleaseRetiredGraphs() {
  std::vector<std::vector<ir::Value>> graphs;
  {
    Retired& retired = GetRetired();
    std::lock_guard<std::mutex> lock(retired.mutex);
    graphs.swap(retired.graphs);
  }
}

}  // namespace torch_tpu::exec
