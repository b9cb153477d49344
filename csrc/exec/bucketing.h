// Growing shapes. A dimension that grows a little at each step (a KV cache appended to with cat,
// the ids generate() extends) would give every program that touches it a new shape, so n steps
// would compile n times. Instead its storage is kept padded to a bucket along that dimension, and
// programs take the true length as a runtime scalar and mask the padding where they reduce over
// it: n steps compile O(log n) programs. Padding was chosen over XLA's bounded-dynamic types
// because PJRT plugins differ in support for dynamic buffers, and padding works on every one.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::exec {

// How a storage's 1-D value lays out a tensor whose dimension `dim` grew: the value holds the
// row-major array of `padded_shape`, whose first `length` positions along `dim` are the tensor's
// (the rest are zeros). A layout with padded_shape[dim] == length is a plain contiguous tensor,
// remembered because it was grown by appending (cat) and may grow again.
struct GrowingLayout {
  ir::Shape padded_shape;
  int64_t dim = 0;
  int64_t length = 0;

  int64_t bucket() const { return padded_shape[dim]; }
  bool padded() const { return bucket() != length; }
  int64_t physical_elements() const { return ir::NumElements(padded_shape); }
  // Whether the tensor's elements are the value's prefix, in order: every dim before `dim` is 1.
  bool logical_prefix() const;
  // Whether a contiguous tensor of `sizes` starting at the storage's first element is the one
  // this layout describes.
  bool Describes(const ir::Shape& sizes) const;
  // The same for a tensor of `sizes` that is the described one with size-1 dims added or
  // dropped (an unsqueezed range): this layout as that shape, or nullopt.
  std::optional<GrowingLayout> AsUnitDimsView(const ir::Shape& sizes) const;
  // Rewrites a view of the tensor (`strides` and `offset` in its elements, `sizes` kept) as the
  // same view of the padded array, when the view stays within single positions of the dims
  // before `dim` (a column of ids, a row of a cache): its strides and offset then depend on the
  // bucket, not on the length. False (nothing changed) for any other view.
  bool MapView(const ir::Shape& sizes, std::vector<int64_t>& strides, int64_t& offset) const;
};

// The padded size for a dimension of `length`: a power of two, at least TORCH_TPU_BUCKET_FLOOR
// (default 16).
int64_t BucketLength(int64_t length);

// The padded size for a dimension of `length` that was grown by appending, after `appended` more
// positions are appended; 0 to leave it unpadded. Small appends onto a longer dimension (a token
// onto a cache) are padded; one concatenation of comparable parts is not.
int64_t AppendBucket(int64_t length, int64_t appended);

// The padded size for a range (arange) of `length`, when a range a little shorter was made
// recently: the key positions a decoding step builds its attention mask from grow by one each
// step. 0 to leave it unpadded. Remembers `length` for the ranges that follow.
int64_t RangeBucket(int64_t length);

}  // namespace torch_tpu::exec
