// Memoized meta-function results. PyTorch's meta functions (argument checks, output shapes and
// dtypes) are mostly Python and cost tens of microseconds per op; their result depends only on
// tensor metadata and non-tensor argument values, so a process-wide map keyed on exactly those
// skips the repeat runs. Failures are never stored: a bad call always reaches the meta function.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

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

// The key of one call, or nullopt when an argument is of a kind the key cannot describe.
std::optional<std::string> MetaKey(const c10::OperatorHandle& op, const c10::Stack& args);
std::optional<std::vector<MetaOutput>> FindMeta(const std::string& key);
void StoreMeta(const std::string& key, std::vector<MetaOutput> outputs);

}  // namespace torch_tpu::aten
