#pragma once

#include <vector>

#include "ir/graph.h"

namespace torch_tpu::exec {

// Freeing a fused cut's graph (a few hundred nodes spread over the heap) took as long as building
// its program, on the flush's path, while the device had work to do. A cut's graph is therefore
// kept once its program is launched and freed where the host next waits for the device (a host
// read, synchronize, an event's wait, empty_cache). A loop that never waits keeps a few at most.
void RetireGraph(std::vector<ir::Value> results);

// Frees the retired graphs; called where the host is about to wait for the device anyway.
void ReleaseRetiredGraphs();

}  // namespace torch_tpu::exec
