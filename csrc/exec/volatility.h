// Recording sites whose fused programs keep changing. A loop whose shapes grow each iteration (a
// KV cache without static shapes), or whose batches differ in size, records the same ops on new
// sizes at every cut, so each cut compiles anew. Such a site is detected here, counted in metrics
// (volatile_programs) and named in a warning, so it never compiles once per iteration silently.
#pragma once

#include "ir/graph.h"

namespace torch_tpu::exec {

// Called for each cut of the pending set that had to compile.
void NoteCompiledCut(const ir::Program& program);

}  // namespace torch_tpu::exec
