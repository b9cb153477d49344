// Lowerings for the indexing op family.
#include "ops/builder.h"

namespace torch_tpu::ops {}  // namespace torch_tpu::ops
