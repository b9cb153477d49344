// Naming the op behind a failed program: a fused program holds many ops, so when it fails to
// compile or run it is replayed op by op (each op with everything it reads) until one fails.
#pragma once

#include <string>

#include "ir/graph.h"

namespace torch_tpu::exec {

// The origin of the first op whose replay fails, with that failure; empty when the program has
// at most one op's worth of nodes, or no replay fails (a failure that needs the whole program).
std::string FailingOrigin(const ir::Program& program, int device_index);

}  // namespace torch_tpu::exec
