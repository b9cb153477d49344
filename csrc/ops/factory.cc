// Lowerings for the factory op family.
#include "ops/builder.h"

namespace torch_tpu::ops {}  // namespace torch_tpu::ops
