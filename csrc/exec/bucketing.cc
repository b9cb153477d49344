#include "exec/bucketing.h"

#include <array>
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

std::optional<GrowingLayout> GrowingLayout::AsUnitDimsView(const ir::Shape& sizes) const {
  if (length <= 1) return std::nullopt;  // the grown dim would be one of the size-1 dims
  // The dims of size other than 1, in order, must be the same; the grown dim is the k-th.
  std::vector<int64_t> kept;
  int64_t grown_rank = -1;
  for (size_t d = 0; d < padded_shape.size(); ++d) {
    const int64_t size = static_cast<int64_t>(d) == dim ? length : padded_shape[d];
    if (static_cast<int64_t>(d) == dim) grown_rank = static_cast<int64_t>(kept.size());
    if (size != 1) kept.push_back(size);
  }
  GrowingLayout view{sizes, -1, length};
  size_t k = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (k >= kept.size() || sizes[d] != kept[k]) return std::nullopt;
    if (static_cast<int64_t>(k) == grown_rank) {
      view.dim = static_cast<int64_t>(d);
      view.padded_shape[d] = bucket();
    }
    ++k;
  }
  if (k != kept.size() || view.dim < 0) return std::nullopt;
  return view;
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

int64_t RangeBucket(int64_t length) {
  // A decoding step makes a few short ranges (batch, head, query positions) besides the keys'.
  constexpr size_t kRecent = 8;
  thread_local std::array<int64_t, kRecent> recent{};
  thread_local size_t next = 0;
  bool grew = false;
  for (int64_t seen : recent) grew |= seen > 0 && length > seen && (length - seen) * 4 <= seen;
  recent[next++ % kRecent] = length;
  return grew ? BucketLength(length) : 0;
}

}  // namespace torch_tpu::exec
