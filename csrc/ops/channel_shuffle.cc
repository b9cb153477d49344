// channel_shuffle(self, groups) (and native_channel_shuffle): input [N, C, *] viewed as
// [N, groups, C / groups, *], the two group dims swapped, flattened back. The argument checks
// are the meta function's. Its backward is channel_shuffle again (derivatives.yaml).
#include <vector>

#include "ops/builder.h"

namespace torch_tpu::ops {
namespace {

std::vector<Value> ChannelShuffleLowering(LoweringContext& ctx) {
  Value self = ctx.tensor(0);
  const Shape& shape = self.shape();
  const int64_t groups = ctx.int_arg(1);
  Shape grouped{shape[0], groups, shape[1] / groups};
  grouped.insert(grouped.end(), shape.begin() + 2, shape.end());
  std::vector<int64_t> swap(grouped.size());
  for (size_t d = 0; d < swap.size(); ++d) swap[d] = static_cast<int64_t>(d);
  std::swap(swap[1], swap[2]);
  return {Reshape(Transpose(Reshape(self, grouped), swap), shape)};
}

LoweringRegistrar registrar({
    {"channel_shuffle", ChannelShuffleLowering},
    {"native_channel_shuffle", ChannelShuffleLowering},
});

}  // namespace
}  // namespace torch_tpu::ops
