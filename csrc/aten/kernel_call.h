// Custom kernels (torch_tpu.kernels): a call of an embedded StableHLO function on tpu tensors,
// recorded as one node in every mode, so it joins the program of the ops around it.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "ir/function.h"

namespace torch_tpu::aten {

struct KernelOutput {
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
};

// Records function(inputs...) and returns new contiguous tensors of the given types on the
// inputs' device. A failure to compile or run it names the kernel.
std::vector<at::Tensor> CallKernel(const std::shared_ptr<const ir::Function>& function,
                                   const std::vector<at::Tensor>& inputs,
                                   const std::vector<KernelOutput>& outputs);

}  // namespace torch_tpu::aten
