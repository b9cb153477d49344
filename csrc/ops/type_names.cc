#include "ops/type_names.h"

#include <stdexcept>

#include "ops/lowering.h"

namespace torch_tpu::ops {

using ir::DType;

namespace {
struct TypeNames {
  DType dtype;
  const char* scalar_type;
  const char* cpp_type;
};
constexpr TypeNames kTypeNames[] = {
    {DType::kBool, "Bool", "bool"},
    {DType::kS8, "Char", "signed char"},
    {DType::kS16, "Short", "short int"},
    {DType::kS32, "Int", "int"},
    {DType::kS64, "Long", "long int"},
    {DType::kU8, "Byte", "unsigned char"},
    {DType::kU16, "UInt16", "uint16_t"},
    {DType::kU32, "UInt32", "uint32_t"},
    {DType::kU64, "UInt64", "uint64_t"},
    {DType::kF16, "Half", "c10::Half"},
    {DType::kBF16, "BFloat16", "c10::BFloat16"},
    {DType::kF32, "Float", "float"},
    {DType::kF64, "Double", "double"},
    {DType::kC64, "ComplexFloat", "c10::complex<float>"},
};
const TypeNames& NamesOf(DType dtype) {
  for (const TypeNames& names : kTypeNames) {
    if (names.dtype == dtype) return names;
  }
  throw std::logic_error("unnamed dtype");
}
}  // namespace

const char* ScalarTypeName(DType dtype) { return NamesOf(dtype).scalar_type; }
const char* CppTypeName(DType dtype) { return NamesOf(dtype).cpp_type; }

namespace {
[[noreturn]] void ThrowNotImplementedFor(const std::string& kernel, DType dtype) {
  throw UnsupportedError("\"" + kernel + "\" not implemented for '" + ScalarTypeName(dtype) + "'");
}
}  // namespace

void CheckFloatingKernel(const std::string& kernel, DType dtype) {
  if (!ir::IsFloating(dtype)) ThrowNotImplementedFor(kernel, dtype);
}

void CheckFloatOrDoubleKernel(const std::string& kernel, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF64) ThrowNotImplementedFor(kernel, dtype);
}

}  // namespace torch_tpu::ops
