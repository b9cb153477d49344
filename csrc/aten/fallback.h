// Recording an op on tpu tensors through its lowering (fallback.cc, the kernel behind every
// lowered op), for kernels that call single ops themselves.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <string>

namespace torch_tpu::aten {

// Whether `op` has a lowering (its name's, in ops/lowering.h's registry).
bool HasLowering(const c10::OperatorHandle& op);

// The kernel behind every lowered op, for a kernel that checks an op's arguments first: runs
// PyTorch's meta function and records `op` through its lowering (or falls back to the CPU).
void RecordThroughLowering(const c10::OperatorHandle& op, c10::Stack* stack);

// "aten::add.Tensor at train.py:12": the op and the user's source line recording it, interned.
std::shared_ptr<const std::string> RecordingSite(const c10::OperatorHandle& op);

// Records `op`, which has a lowering, with the arguments on `stack`, whose every result has
// `like`'s sizes, strides and dtype: an in-place op's `like` is its self, a functional op's
// results are fresh tensors laid out as `like`. PyTorch's meta function is not run, so the caller
// checks the arguments, as the batched ops do. Replaces the arguments by the results, as a kernel
// does. The caller has called StartRecording().
void RecordShapedLike(const c10::OperatorHandle& op, c10::Stack* stack, const at::Tensor& like);

}  // namespace torch_tpu::aten
