#include "exec/bucketing.h"

#include <cstdlib>

namespace torch_tpu::exec {

bool GrowingLayout::logical_prefix() const {
  for (int64_t d = 0; d < dim; ++d) {
    if (padded_shape[d] != 1) return false;
  }
  return true;
}

bool GrowingLayout::Describes(const ir::Shape& sizes) const {
  if (sizes.size() != padded_shape.size()) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t expected = static_cast<int64_t>(d) == dim ? length : padded_shape[d];
    if (sizes[d] != expected) return false;
  }
  return true;
}

int64_t BucketLength(int64_t length) {
  static const int64_t floor = [] {
    const char* value = std::getenv("TORCH_TPU_BUCKET_FLOOR");
    const int64_t parsed = value != nullptr ? std::atoll(value) : 16;
    return parsed > 0 ? parsed : 16;
  }();
  int64_t bucket = 1;
  while (bucket < floor) bucket <<= 1;
  while (bucket < length) bucket <<= 1;
  return bucket;
}

int64_t AppendBucket(int64_t length, int64_t appended) {
  if (appended <= 0 || appended * 4 > length) return 0;
  return BucketLength(length + appended);
}

}  // namespace torch_tpu::exec
