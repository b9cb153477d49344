#pragma once

#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_tpu::runtime {

// Things whose destruction waits for a moment when it cannot stall the host: donated buffers'
// handles (buffer_release.h), launched programs' graphs (exec/graph_release.h). A loop that never
// reaches such a moment still keeps at most `bound`: past it, the oldest half is given back to
// be destroyed at once. Callers destroy what they get back after the call, outside the lock.
template <typename T>
class RetiredList {
 public:
  explicit RetiredList(size_t bound) : bound_(bound) {}

  // Keeps `item`; returns what must be destroyed now (nothing below the bound).
  std::vector<T> Add(T item) {
    std::vector<T> oldest;
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(item));
    if (items_.size() <= bound_) return oldest;
    const auto half = items_.begin() + static_cast<std::ptrdiff_t>(bound_ / 2);
    oldest.assign(std::make_move_iterator(items_.begin()), std::make_move_iterator(half));
    items_.erase(items_.begin(), half);
    return oldest;
  }

  // Everything kept, to be destroyed now.
  std::vector<T> TakeAll() {
    std::vector<T> items;
    std::lock_guard<std::mutex> lock(mutex_);
    items.swap(items_);
    return items;
  }

 private:
  const size_t bound_;
  std::mutex mutex_;
  std::vector<T> items_;
};

}  // namespace torch_tpu::runtime
