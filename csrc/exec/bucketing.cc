#include "exec/bucketing.h"

#include <cstdlib>
#include <utility>

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

bool GrowingLayout::MapView(const ir::Shape& sizes, std::vector<int64_t>& strides,
                            int64_t& offset) const {
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < padded_shape.size(); ++d) {
    inner *= padded_shape[d];
  }
  // One position of the dims before `dim` spans `row` elements of the tensor, `padded_row` of
  // the padded array.
  const int64_t row = length * inner, padded_row = bucket() * inner;
  if (row == 0 || offset < 0) return false;
  // Strides that step over whole rows map by the ratio; the rest must keep the view inside the
  // row its offset starts in.
  int64_t within_row = offset % row;
  std::vector<int64_t> mapped = strides;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] <= 1) continue;
    if (strides[d] < 0) return false;
    if (strides[d] % row == 0) {
      mapped[d] = strides[d] / row * padded_row;
    } else {
      within_row += (sizes[d] - 1) * strides[d];
    }
  }
  if (within_row >= row) return false;
  strides = std::move(mapped);
  offset = offset / row * padded_row + offset % row;
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
