// PyTorch's names for dtypes, for argument-check messages that must read exactly as the CPU's.
#pragma once

#include <string>

#include "ir/graph.h"

namespace torch_tpu::ops {

// c10::ScalarType's name: "Float", "Long", "BFloat16".
const char* ScalarTypeName(ir::DType dtype);
// caffe2::TypeMeta's name, the C++ type: "float", "long int", "c10::BFloat16".
const char* CppTypeName(ir::DType dtype);

// Throws UnsupportedError '"kernel" not implemented for 'Long'' (the message of PyTorch's dtype
// dispatch) unless dtype is floating: for ops whose CPU kernels exist only for floating dtypes.
void CheckFloatingKernel(const std::string& kernel, ir::DType dtype);
// The same for ops whose CPU kernels exist for float and double only (LAPACK, distances).
void CheckFloatOrDoubleKernel(const std::string& kernel, ir::DType dtype);

}  // namespace torch_tpu::ops
