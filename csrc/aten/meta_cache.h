// Memoized meta-function results. PyTorch's meta functions (argument checks, output shapes and
// dtypes) are mostly Python and cost tens of microseconds per op; their result depends only on
// tensor metadata and non-tensor argument values, so a process-wide map keyed on exactly those
// skips the repeat runs. Failures are never stored: a bad call always reaches the meta function.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_tpu::aten {

struct MetaOutput {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  at::ScalarType dtype;
  bool defined = true;  // false for a result the op leaves undefined (an output_mask false)
};

using MetaOutputs = std::vector<MetaOutput>;

// Builds the key of one call into `key`, reusing its capacity (one key per op call is built, so
// no allocation on the way); false when an argument is of a kind the key cannot describe.
bool MetaKey(const c10::OperatorHandle& op, const c10::Stack& args, std::string& key);
// Shared, not copied: a hit costs no allocation.
std::shared_ptr<const MetaOutputs> FindMeta(const std::string& key);
void StoreMeta(const std::string& key, std::shared_ptr<const MetaOutputs> outputs);

}  // namespace torch_tpu::aten
