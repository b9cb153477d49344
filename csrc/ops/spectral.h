// The singular value decomposition of spectral.cc, for the other lowerings that need one
// (linalg_lstsq's rank-revealing drivers in qr.cc).
#pragma once

#include "ops/builder.h"

namespace torch_tpu::ops {

struct ThinSvd {
  Value u;  // (*, m, k): orthonormal columns
  Value s;  // (*, k): real, descending
  Value v;  // (*, n, k): orthonormal columns (V, not V^H)
};

// a = u diag(s) v^H for a (*, m, n) of f32, f64 or complex64 with k = min(m, n) >= 1, by
// one-sided Jacobi; matrices with a non-finite entry get NaN factors.
ThinSvd ThinSingularValueDecomposition(const Value& a);

}  // namespace torch_tpu::ops
