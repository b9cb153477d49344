// PyTorch's names for dtypes, for argument-check messages that must read exactly as the CPU's.
#pragma once

#include "ir/graph.h"

namespace torch_tpu::ops {

// c10::ScalarType's name: "Float", "Long", "BFloat16".
const char* ScalarTypeName(ir::DType dtype);
// caffe2::TypeMeta's name, the C++ type: "float", "long int", "c10::BFloat16".
const char* CppTypeName(ir::DType dtype);

}  // namespace torch_tpu::ops
