#include "distributed/in_program.h"

#include <ATen/ATen.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "aten/tpu_tensor.h"
#include "exec/compile_cache.h"
#include "exec/context.h"
#include "exec/pending.h"
#include "exec/scalar_upload.h"
#include "exec/storage.h"
#include "ops/builder.h"

namespace torch_tpu::distributed::in_program {

namespace {

using ir::DType;
using ir::TensorType;
using ir::Value;

// ---- Checks ----

std::vector<std::vector<int64_t>> GroupsOf(const Collective& collective) {
  if (!collective.groups.empty()) return collective.groups;
  std::vector<int64_t> everyone(collective.num_replicas);
  for (int r = 0; r < collective.num_replicas; ++r) everyone[r] = r;
  return {everyone};
}

int64_t GroupSize(const Collective& collective) {
  return static_cast<int64_t>(GroupsOf(collective)[0].size());
}

std::string Describe(const std::vector<std::vector<int64_t>>& groups) {
  std::string text = "[";
  for (size_t g = 0; g < groups.size(); ++g) text += (g ? ", " : "") + ir::I64List(groups[g]);
  return text + "]";
}

[[noreturn]] void Fail(const std::string& message) { throw std::invalid_argument(message); }

// Every replica in exactly one group, all groups of one size (the result shapes depend on it).
void CheckGroups(const Collective& collective) {
  const auto groups = GroupsOf(collective);
  const std::string what = "replica groups " + Describe(groups) + " must partition the ranks 0.." +
                           std::to_string(collective.num_replicas - 1) + " into groups of one size";
  std::vector<int> seen(collective.num_replicas, 0);
  for (const auto& group : groups) {
    if (group.empty() || group.size() != groups[0].size()) Fail(what);
    for (int64_t rank : group) {
      if (rank < 0 || rank >= collective.num_replicas) {
        Fail(what + "; rank " + std::to_string(rank) + " is out of range");
      }
      if (seen[rank]++) Fail(what + "; rank " + std::to_string(rank) + " appears twice");
    }
  }
  for (int r = 0; r < collective.num_replicas; ++r) {
    if (!seen[r]) Fail(what + "; rank " + std::to_string(r) + " is missing");
  }
}

void CheckPairs(const Collective& collective) {
  if (!collective.groups.empty()) Fail("collective_permute takes source-target pairs, not groups");
  std::vector<int> sources(collective.num_replicas, 0), targets(collective.num_replicas, 0);
  for (const auto& [source, target] : collective.source_target_pairs) {
    const std::string pair = "(" + std::to_string(source) + ", " + std::to_string(target) + ")";
    if (source < 0 || source >= collective.num_replicas || target < 0 ||
        target >= collective.num_replicas) {
      Fail("source-target pair " + pair + " names a rank outside 0.." +
           std::to_string(collective.num_replicas - 1));
    }
    if (sources[source]++) Fail("rank " + std::to_string(source) + " is a source twice");
    if (targets[target]++) Fail("rank " + std::to_string(target) + " is a target twice");
  }
}

// reduce_scatter and all_to_all split dim 0 into one part per group member.
void CheckSplitDim(const Collective& collective, const TensorType& input) {
  const int64_t parts = GroupSize(collective);
  if (input.rank() == 0 || input.shape[0] % parts != 0) {
    Fail("dim 0 of the input (shape " + ir::I64List(input.shape) +
         ") must split into as many equal parts as a group has ranks (" + std::to_string(parts) +
         ")");
  }
}

// ---- Lowering ----

std::string DenseI64Matrix(const std::vector<std::vector<int64_t>>& rows) {
  std::string text = "dense<" + Describe(rows) + "> : tensor<";
  text += std::to_string(rows.size()) + "x" + std::to_string(rows.empty() ? 0 : rows[0].size());
  return text + "xi64>";
}

std::string GroupsAttribute(const Collective& collective) {
  return "replica_groups = " + DenseI64Matrix(GroupsOf(collective));
}

const char* CombinerOp(Reduction reduction) {
  switch (reduction) {
    case Reduction::kProduct:
      return "stablehlo.multiply";
    case Reduction::kMin:
      return "stablehlo.minimum";
    case Reduction::kMax:
      return "stablehlo.maximum";
    default:  // SUM, and the SUM under AVG and PREMUL_SUM
      return "stablehlo.add";
  }
}

// The reduction body: two scalars of `dtype` in, their combination out.
ir::Region Combiner(Reduction reduction, DType dtype) {
  const TensorType scalar{dtype, {}};
  return ir::MakeRegion({scalar, scalar}, [&](const std::vector<Value>& operands) {
    return std::vector<Value>{ir::MakeOp(CombinerOp(reduction), operands, scalar)};
  });
}

// The factor as a runtime scalar, so a new PREMUL_SUM factor does not recompile.
Value FactorParameter(double factor, DType dtype) {
  ir::HostScalar scalar;
  scalar.dtype = dtype;
  if (dtype == DType::kF64) {
    std::memcpy(scalar.bytes, &factor, sizeof(factor));
  } else {
    const float narrowed = static_cast<float>(factor);
    std::memcpy(scalar.bytes, &narrowed, sizeof(narrowed));
  }
  return ir::MakeScalarParameter(scalar);
}

// AVG divides the sum by the group size and PREMUL_SUM multiplies it by the factor; floats are
// scaled in f32 at least (PyTorch's opmath), integers divide truncating, as NCCL's AVG does.
Value ScaleSum(const Collective& collective, const Value& sum) {
  const DType dtype = sum.dtype();
  if (collective.reduction == Reduction::kAvg && ir::IsIntegral(dtype)) {
    return ops::Div(sum, ops::Constant(static_cast<double>(GroupSize(collective)), dtype));
  }
  const DType compute = ops::OpMathType(dtype);
  const Value wide = ops::Convert(sum, compute);
  const Value scaled =
      collective.reduction == Reduction::kAvg
          ? ops::Div(wide, ops::Constant(static_cast<double>(GroupSize(collective)), compute))
          : ops::Mul(wide, FactorParameter(collective.factor, compute));
  return ops::Convert(scaled, dtype);
}

Value Reduced(const Collective& collective, const Value& input, const std::string& op,
              const TensorType& result, const std::string& attributes) {
  Value sum = ir::MakeMultiOp(op, {input}, {result}, attributes,
                              {Combiner(collective.reduction, input.dtype())})[0];
  const bool scaled =
      collective.reduction == Reduction::kAvg || collective.reduction == Reduction::kPremulSum;
  return scaled ? ScaleSum(collective, sum) : sum;
}

std::string SourceTargetPairsAttribute(const Collective& collective) {
  std::vector<std::vector<int64_t>> pairs;
  for (const auto& [source, target] : collective.source_target_pairs) {
    pairs.push_back({source, target});
  }
  if (pairs.empty()) return "source_target_pairs = dense<> : tensor<0x2xi64>";
  return "source_target_pairs = " + DenseI64Matrix(pairs);
}

}  // namespace

void Check(const Collective& collective, const TensorType& input) {
  if (collective.num_replicas < 1) Fail("a collective needs at least one replica");
  if (collective.kind == Kind::kCollectivePermute) return CheckPairs(collective);
  CheckGroups(collective);
  if (collective.kind == Kind::kAllGather && input.rank() == 0) {
    Fail("all_gather concatenates along dim 0, which a 0-d input does not have");
  }
  if (collective.kind == Kind::kReduceScatter || collective.kind == Kind::kAllToAll) {
    CheckSplitDim(collective, input);
  }
  if (collective.reduction == Reduction::kPremulSum && !ir::IsFloating(input.dtype)) {
    Fail("PREMUL_SUM needs a floating-point dtype");
  }
}

TensorType ResultType(const Collective& collective, const TensorType& input) {
  TensorType result = input;
  if (collective.kind == Kind::kAllGather) result.shape[0] *= GroupSize(collective);
  if (collective.kind == Kind::kReduceScatter) result.shape[0] /= GroupSize(collective);
  return result;
}

Value Lower(const Collective& collective, const Value& input) {
  const TensorType result = ResultType(collective, input.type());
  const std::string groups = GroupsAttribute(collective);
  switch (collective.kind) {
    case Kind::kAllReduce:
      return Reduced(collective, input, "stablehlo.all_reduce", result, groups);
    case Kind::kReduceScatter:
      return Reduced(collective, input, "stablehlo.reduce_scatter", result,
                     "scatter_dimension = 0 : i64, " + groups);
    case Kind::kAllGather:
      return ir::MakeOp("stablehlo.all_gather", {input}, result,
                        "all_gather_dim = 0 : i64, " + groups);
    case Kind::kAllToAll:
      return ir::MakeOp("stablehlo.all_to_all", {input}, result,
                        "split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = " +
                            std::to_string(GroupSize(collective)) + " : i64, " + groups);
    case Kind::kCollectivePermute:
      return ir::MakeOp("stablehlo.collective_permute", {input}, result,
                        SourceTargetPairsAttribute(collective));
  }
  throw std::logic_error("in_program::Lower: unknown collective");
}

ir::Program BuildProgram(const Collective& collective, const TensorType& input) {
  const Value flat =
      ir::MakeBufferParameter(nullptr, TensorType{input.dtype, {ir::NumElements(input.shape)}});
  const Value result = Lower(collective, ops::Reshape(flat, input.shape));
  return ir::BuildProgram({ops::Reshape(result, {ir::NumElements(result.shape())})});
}

// ---- Execution over tpu tensors ----

namespace {

// Replica r on device r, in one launch on all of them.
runtime::CompileOptions ReplicatedOptions(int num_replicas) {
  runtime::CompileOptions options;
  options.num_replicas = num_replicas;
  for (int r = 0; r < num_replicas; ++r) {
    options.device_assignment.push_back(exec::GetDevice(r).id());
  }
  return options;
}

// The structure plus the replica count and device assignment, which the text alone lacks.
ir::Signature ReplicatedSignature(const ir::Program& program,
                                  const runtime::CompileOptions& options) {
  ir::Hasher salt;
  salt.Add(std::string("in-program collective"));
  salt.Add(static_cast<uint64_t>(options.num_replicas));
  for (int64_t id : options.device_assignment) salt.Add(static_cast<uint64_t>(id));
  return ir::ComputeSignature(program, salt.Finish().low);
}

// Runs `program` once on every device, inputs[r] on device r; returns each replica's result.
std::vector<std::shared_ptr<runtime::Buffer>> RunReplicated(
    const ir::Program& program, const std::vector<std::shared_ptr<runtime::Buffer>>& inputs) {
  const int num_replicas = static_cast<int>(inputs.size());
  const runtime::CompileOptions options = ReplicatedOptions(num_replicas);
  const ir::Signature signature = ReplicatedSignature(program, options);
  auto print = [&] { return ir::PrintProgram(program, num_replicas); };
  auto executable = exec::GetExecutable(signature, print, options);
  std::vector<std::vector<PJRT_Buffer*>> arguments(num_replicas);
  std::vector<std::shared_ptr<runtime::Buffer>> uploads;
  for (int r = 0; r < num_replicas; ++r) {
    arguments[r].push_back(inputs[r]->raw());
    for (const ir::ScalarPack& pack : program.scalar_packs) {
      uploads.push_back(exec::UploadScalarPack(pack, exec::GetDevice(r)));
      arguments[r].push_back(uploads.back()->raw());
    }
  }
  std::vector<std::vector<std::shared_ptr<runtime::Buffer>>> outputs;
  try {
    outputs = executable->ExecuteReplicated(arguments);
  } catch (const runtime::PjrtError& e) {
    const std::string dump = exec::DumpProgram(signature, print());
    throw runtime::PjrtError(
        e.code(), std::string(e.what()) + "\nThe StableHLO program was written to " + dump);
  }
  std::vector<std::shared_ptr<runtime::Buffer>> results;
  for (auto& replica : outputs) results.push_back(std::move(replica.at(0)));
  exec::GetMetrics().executions++;
  exec::NoteLaunched(results);
  return results;
}

void CheckInputs(const std::vector<at::Tensor>& inputs) {
  const int devices = exec::DeviceCount();
  if (static_cast<int>(inputs.size()) != devices) {
    Fail("an in-program collective takes one input per tpu device (" + std::to_string(devices) +
         "), got " + std::to_string(inputs.size()));
  }
  for (size_t r = 0; r < inputs.size(); ++r) {
    const at::Tensor& input = inputs[r];
    const std::string name = "input " + std::to_string(r);
    if (!input.is_privateuseone() || input.device().index() != static_cast<int>(r)) {
      Fail(name + " is on " + input.device().str() + "; input i must be on tpu:i");
    }
    if (input.scalar_type() != inputs[0].scalar_type() ||
        !input.sizes().equals(inputs[0].sizes())) {
      Fail(name + " is " + std::string(c10::toString(input.scalar_type())) + " of shape " +
           ir::I64List(input.sizes().vec()) + ", input 0 " +
           std::string(c10::toString(inputs[0].scalar_type())) + " of shape " +
           ir::I64List(inputs[0].sizes().vec()) + ": every input needs the same dtype and shape");
    }
    if (input.numel() == 0) Fail(name + " is empty");
  }
}

// The tensor's elements as a dense 1-D buffer: its storage's own buffer when the tensor covers
// the whole storage in row-major order with the storage's element type, else a contiguous copy's.
std::shared_ptr<runtime::Buffer> DenseBuffer(const at::Tensor& tensor) {
  const DType dtype = aten::ToDType(tensor.scalar_type());
  exec::DeviceStorage* storage = aten::StorageOf(tensor);
  const bool whole = tensor.is_contiguous() && tensor.storage_offset() == 0 &&
                     storage->initialized() && storage->element_type() == dtype &&
                     !storage->padded() &&
                     storage->nbytes() == static_cast<size_t>(tensor.numel()) * ir::ByteSize(dtype);
  const at::Tensor dense = whole ? tensor : tensor.clone(at::MemoryFormat::Contiguous);
  exec::DeviceStorage* dense_storage = aten::StorageOf(dense);
  exec::MaterializeForRead(dense_storage, "collective");
  return dense_storage->buffer();
}

at::Tensor WrapResult(std::shared_ptr<runtime::Buffer> buffer, const TensorType& type,
                      at::ScalarType scalar_type, int device) {
  at::Tensor result =
      aten::EmptyTpuContiguous(type.shape, scalar_type, static_cast<c10::DeviceIndex>(device));
  aten::StorageOf(result)->SetBuffer(std::move(buffer), type.dtype);
  return result;
}

}  // namespace

std::vector<at::Tensor> Run(const Collective& collective, const std::vector<at::Tensor>& inputs) {
  CheckInputs(inputs);
  if (collective.num_replicas != static_cast<int>(inputs.size())) {
    Fail("the collective has " + std::to_string(collective.num_replicas) + " replicas but " +
         std::to_string(inputs.size()) + " inputs");
  }
  const TensorType input_type{aten::ToDType(inputs[0].scalar_type()), inputs[0].sizes().vec()};
  Check(collective, input_type);
  return aten::Translate([&] {
    std::vector<std::shared_ptr<runtime::Buffer>> buffers;
    for (const at::Tensor& input : inputs) buffers.push_back(DenseBuffer(input));
    const ir::Program program = BuildProgram(collective, input_type);
    std::vector<std::shared_ptr<runtime::Buffer>> results = RunReplicated(program, buffers);
    const TensorType result_type = ResultType(collective, input_type);
    std::vector<at::Tensor> outputs;
    for (size_t r = 0; r < results.size(); ++r) {
      outputs.push_back(WrapResult(std::move(results[r]), result_type, inputs[0].scalar_type(),
                                   static_cast<int>(r)));
    }
    return outputs;
  });
}

}  // namespace torch_tpu::distributed::in_program
