// Collectives inside the program (DESIGN.md, "Distributed"): one StableHLO module runs on N
// replicas in one launch, and its all_reduce, all_gather, reduce_scatter, all_to_all or
// collective_permute exchanges values between them, the transport for libtpu and the CUDA
// plugin. The lowering (Check, ResultType, Lower, BuildProgram) works on graph values and knows
// nothing of torch; Run takes one tpu tensor per device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::distributed::in_program {

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kCollectivePermute };

// c10d's reduce ops. AVG and PREMUL_SUM are a SUM followed by a scale.
enum class Reduction { kSum, kProduct, kMin, kMax, kAvg, kPremulSum };

struct Collective {
  Kind kind = Kind::kAllReduce;
  Reduction reduction = Reduction::kSum;  // all_reduce, reduce_scatter
  int num_replicas = 1;
  // Replica groups of one size that partition 0..num_replicas-1; each group exchanges apart.
  std::vector<std::vector<int64_t>> groups;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;  // collective_permute
  double factor = 1.0;                                           // PREMUL_SUM's multiplier
};

// Throws std::invalid_argument saying what does not fit: groups that are not a partition of the
// replicas, pairs out of range or repeated, a dim 0 the group size does not divide, ...
void Check(const Collective& collective, const ir::TensorType& input);
// One replica's result type for an input of type `input`.
ir::TensorType ResultType(const Collective& collective, const ir::TensorType& input);
// One replica's collective over `input`, recorded as graph nodes.
ir::Value Lower(const Collective& collective, const ir::Value& input);
// The program each replica runs: a storage's dense 1-D buffer in, reshaped to `input` for the
// collective, and the result flattened to a dense 1-D buffer out.
ir::Program BuildProgram(const Collective& collective, const ir::TensorType& input);

// Runs the collective in one launch on tpu:0..N-1, replica i on tpu:i over inputs[i] (tensors
// of one shape and dtype); returns each device's result as a new tensor on that device.
std::vector<at::Tensor> Run(const Collective& collective, const std::vector<at::Tensor>& inputs);

}  // namespace torch_tpu::distributed::in_program
