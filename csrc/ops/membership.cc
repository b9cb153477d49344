// Membership tests: isin (Hugging Face's generate() checks its special tokens with it).
#include <functional>
#include <numeric>
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

// isin(elements, test_elements, *, assume_unique, invert) in its Tensor_Tensor, Tensor_Scalar and
// Scalar_Tensor forms. Both sides are compared in their result_type, as the CPU does. Every
// element is compared with every test element and the matches are or-reduced, so the result does
// not depend on assume_unique (a hint the CPU's sorting path alone uses).
std::vector<Value> IsinLowering(LoweringContext& ctx) {
  const DType common = ctx.promoted;
  Value elements = ctx.value(0, common);
  Value tests = ctx.value(1, common);
  const int64_t count = std::accumulate(tests.shape().begin(), tests.shape().end(), int64_t{1},
                                        std::multiplies<int64_t>());
  tests = Reshape(tests, {count});

  const int64_t rank = elements.rank();
  Shape pairs_shape = elements.shape();
  pairs_shape.push_back(count);
  std::vector<int64_t> element_dims(rank);
  std::iota(element_dims.begin(), element_dims.end(), int64_t{0});
  Value matches = Compare(BroadcastInDim(elements, pairs_shape, element_dims),
                          BroadcastInDim(tests, pairs_shape, {rank}), "EQ");
  Value found = Reduce(matches, {rank}, "stablehlo.or", Constant(0, DType::kBool));
  if (ctx.bool_arg(3)) found = Not(found);
  const TensorType& output = ctx.output();
  return {Convert(Reshape(found, output.shape), output.dtype)};
}

const LoweringRegistrar registrar{
    {"isin", IsinLowering},
};

}  // namespace
}  // namespace torch_tpu::ops
