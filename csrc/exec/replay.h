// Naming the op behind a failed program: a fused program holds many ops, so when it fails to
// compile or run it is replayed op by op (each op with everything it reads) until one fails.
#pragma once

#include <string>

#include "ir/graph.h"

namespace torch_tpu::exec {

// The origin of the first op whose replay fails, with that failure; the op's origin alone when
// the program is one recorded op; empty when no replay fails (a failure that needs the whole
// program) or the program's nodes carry no origin.
std::string FailingOrigin(const ir::Program& program, int device_index);

}  // namespace torch_tpu::exec
