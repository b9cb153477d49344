// native_layer_norm on tpu. PyTorch's CompositeExplicitAutograd kernel would decompose it into
// native_batch_norm on a view and views and an addcmul after it, the affine part rounded to the
// input's dtype twice (and computed in f32 for bf16 input with f32 parameters); here it is one op,
// recorded through its lowering (ops/norm.cc), after the CPU kernel's argument checks with its
// messages (PyTorch's Python meta function words them differently).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "aten/fallback.h"

namespace torch_tpu::aten {
namespace {

// "[2, 3]", as c10 prints an IntArrayRef.
std::string ShapeText(c10::IntArrayRef shape) {
  std::ostringstream text;
  text << shape;
  return text.str();
}

void CheckLayerNormArguments(const at::Tensor& input, c10::IntArrayRef normalized_shape,
                             const std::optional<at::Tensor>& weight,
                             const std::optional<at::Tensor>& bias) {
  const auto rank = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(rank >= 1,
              "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
              "one element, but got normalized_shape = ",
              normalized_shape);
  for (const auto& [name, parameter] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}}) {
    const bool defined = parameter->has_value() && (*parameter)->defined();
    TORCH_CHECK(!defined || (*parameter)->sizes().equals(normalized_shape), "Expected ", name,
                " to be of same shape as normalized_shape, but got ", name, " of shape ",
                ShapeText((*parameter)->sizes()), " and normalized_shape = ", normalized_shape);
  }
  const c10::IntArrayRef sizes = input.sizes();
  if (input.dim() < rank || !sizes.slice(input.dim() - rank).equals(normalized_shape)) {
    std::ostringstream message;
    message << "Given normalized_shape=" << normalized_shape << ", expected input with shape [*";
    for (int64_t size : normalized_shape) message << ", " << size;
    message << "], but got input of size" << sizes;
    TORCH_CHECK(false, message.str());
  }
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps), boxed.
void NativeLayerNorm(const c10::OperatorHandle& op, c10::Stack* stack) {
  const size_t begin = stack->size() - 5;
  const c10::IValue& shape = (*stack)[begin + 1];
  std::vector<int64_t> normalized_shape;
  if (shape.isIntList()) {
    normalized_shape = shape.toIntVector();
  } else {
    for (const c10::SymInt& size : shape.toSymIntList())
      normalized_shape.push_back(size.expect_int());
  }
  CheckLayerNormArguments((*stack)[begin].toTensor(), normalized_shape,
                          (*stack)[begin + 2].toOptional<at::Tensor>(),
                          (*stack)[begin + 3].toOptional<at::Tensor>());
  RecordThroughLowering(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", torch::CppFunction::makeFromBoxedFunction<&NativeLayerNorm>());
}

}  // namespace torch_tpu::aten
