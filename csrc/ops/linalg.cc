// Lowerings for the linalg op family.
#include "ops/builder.h"

namespace torch_tpu::ops {}  // namespace torch_tpu::ops
