#include "distributed/process_group_tpu.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstring>
#include <sstream>

namespace torch_tpu::distributed {

namespace {

// ---- Staging between the device and the host ----

at::Tensor ToHost(const at::Tensor& tensor) { return tensor.to(at::kCPU).contiguous(); }

std::vector<at::Tensor> ToHost(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> host;
  host.reserve(tensors.size());
  for (const auto& tensor : tensors) host.push_back(ToHost(tensor));
  return host;
}

// A host tensor for results only: nothing is copied down.
at::Tensor HostLike(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(), tensor.options().device(at::kCPU));
}

std::vector<at::Tensor> HostLike(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> host;
  host.reserve(tensors.size());
  for (const auto& tensor : tensors) host.push_back(HostLike(tensor));
  return host;
}

std::vector<std::vector<at::Tensor>> HostLike(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> host;
  for (const auto& list : lists) host.push_back(HostLike(list));
  return host;
}

// Writes into the device tensor's storage, so a view of a larger tensor sees the result.
void CopyBack(std::vector<at::Tensor>& device, const std::vector<at::Tensor>& host) {
  for (size_t i = 0; i < device.size(); ++i) device[i].copy_(host[i]);
}

void CopyBack(std::vector<std::vector<at::Tensor>>& device,
              const std::vector<std::vector<at::Tensor>>& host) {
  for (size_t i = 0; i < device.size(); ++i) CopyBack(device[i], host[i]);
}

// ---- Reductions the host lacks: AVG and PREMUL_SUM are SUM plus a scale ----

c10d::ReduceOp PrepareReduce(const c10d::ReduceOp& op, std::vector<at::Tensor>& host_inputs) {
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    // NCCLPreMulSumSupplement: the name torch 2.11 has (2.13 keeps it as an alias).
    auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement != nullptr, "tpu: PREMUL_SUM without a factor");
    for (auto& input : host_inputs) {
      if (supplement->tensor_factor.defined()) {
        input.mul_(supplement->tensor_factor.to(at::kCPU));
      } else {
        input.mul_(supplement->double_factor);
      }
    }
    return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
  if (op.op_ == c10d::ReduceOp::AVG) return c10d::ReduceOp(c10d::ReduceOp::SUM);
  return op;
}

// Integers average with truncating division, as NCCL's ncclAvg does.
void FinishReduce(const c10d::ReduceOp& op, std::vector<at::Tensor>& host_results, int size) {
  if (op.op_ != c10d::ReduceOp::AVG) return;
  for (auto& result : host_results) {
    if (at::isFloatingType(result.scalar_type()) || at::isComplexType(result.scalar_type())) {
      result.div_(size);
    } else {
      result.div_(size, "trunc");
    }
  }
}

// ---- The cross-rank fingerprint ----

constexpr int kMaxFingerprintDims = 8;

// kind, tensor count, dtype, rank, numel, then the leading sizes; as bytes for the store.
using Fingerprint = std::array<int64_t, 5 + kMaxFingerprintDims>;

int64_t KindCode(const char* name) {
  return static_cast<int64_t>(std::hash<std::string>()(name) & 0x7fffffffffffffffull);
}

std::vector<uint8_t> FingerprintBytes(const char* name, const std::vector<at::Tensor>& tensors,
                                      bool same_shape) {
  Fingerprint data{};
  data[0] = KindCode(name);
  data[1] = static_cast<int64_t>(tensors.size());
  if (!tensors.empty()) {
    const at::Tensor& first = tensors.front();
    data[2] = static_cast<int64_t>(first.scalar_type());
    if (same_shape) {
      data[3] = first.dim();
      data[4] = first.numel();
      for (int64_t d = 0; d < std::min<int64_t>(first.dim(), kMaxFingerprintDims); ++d) {
        data[5 + d] = first.size(d);
      }
    }
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  return std::vector<uint8_t>(bytes, bytes + sizeof(Fingerprint));
}

std::string DescribeFingerprint(const char* name, const std::vector<uint8_t>& bytes,
                                bool same_shape) {
  Fingerprint data{};
  if (bytes.size() != sizeof(Fingerprint)) return "an unreadable entry";
  std::memcpy(data.data(), bytes.data(), sizeof(Fingerprint));
  if (data[0] != KindCode(name)) return "a different collective";
  if (data[1] == 0) return "no tensors";
  std::ostringstream out;
  if (data[1] > 1) out << data[1] << " x ";
  out << c10::getDtypeNames(static_cast<at::ScalarType>(data[2])).first;
  if (!same_shape) return out.str();
  out << "[";
  for (int64_t d = 0; d < std::min<int64_t>(data[3], kMaxFingerprintDims); ++d) {
    out << (d ? ", " : "") << data[5 + d];
  }
  out << (data[3] > kMaxFingerprintDims ? ", ...]" : "]");
  return out.str();
}

// Where a rank leaves its fingerprint of collective `index`; it deletes it once the collective
// is done, so the keys present name the ranks that reached a collective still running.
std::string EntryKey(uint64_t index, int rank) {
  return "tpu_collectives/" + std::to_string(index) + "/" + std::to_string(rank);
}

// A completed Work: the collective ran before the call returned.
class CompletedWork final : public c10d::Work {
 public:
  CompletedWork(c10d::OpType type, std::vector<at::Tensor> results, int source_rank = -1)
      : c10d::Work(-1, type),
        results_(std::move(results)),
        source_rank_(source_rank),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(results_));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  int sourceRank() const override { return source_rank_; }
  std::vector<at::Tensor> result() override { return results_; }
  bool wait(std::chrono::milliseconds) override { return true; }
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> results_;
  int source_rank_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> Done(c10d::OpType type, std::vector<at::Tensor> results) {
  return c10::make_intrusive<CompletedWork>(type, std::move(results));
}

std::vector<at::Tensor> Flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

}  // namespace

ProcessGroupTPU::ProcessGroupTPU(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                 c10::intrusive_ptr<c10d::Backend> host,
                                 std::chrono::milliseconds timeout, bool check_across_ranks)
    : c10d::Backend(rank, size),
      store_(std::move(store)),
      host_(std::move(host)),
      timeout_(timeout),
      check_across_ranks_(check_across_ranks) {
  TORCH_CHECK(host_, "tpu: the host-staged transport needs a Gloo backend");
}

void ProcessGroupTPU::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  host_->setTimeout(timeout);
}

void ProcessGroupTPU::Wait(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

void ProcessGroupTPU::CheckSameAcrossRanks(const char* name, const std::vector<uint8_t>& mine,
                                           bool same_shape) {
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(EntryKey(collectives_, r));
  store_->wait(keys, timeout_);
  const auto all = store_->multiGet(keys);
  bool same = true;
  for (const auto& other : all) same = same && other == mine;
  if (same) return;
  std::ostringstream message;
  message << "tpu: " << name << " was called with tensors that differ between ranks:";
  for (int r = 0; r < size_; ++r) {
    message << (r ? ";" : "") << " rank " << r << " has "
            << DescribeFingerprint(name, all[r], same_shape);
  }
  C10_THROW_ERROR(ValueError, message.str());
}

void ProcessGroupTPU::RaiseHostFailure(const char* name, const std::exception& error) {
  std::ostringstream message;
  message << "tpu: " << name << " (collective " << collectives_ << " of this group, rank " << rank_
          << " of " << size_ << ") failed: " << error.what();
  try {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!store_->check({EntryKey(collectives_, r)})) missing.push_back(r);
    }
    if (missing.empty()) {
      message << "\nEvery rank of the group reached this collective.";
    } else {
      message << "\nRanks that never joined it: ";
      for (size_t i = 0; i < missing.size(); ++i) message << (i ? ", " : "") << missing[i];
    }
  } catch (const std::exception&) {
    message << "\n(The store could not be read to tell which ranks are missing.)";
  }
  C10_THROW_ERROR(DistBackendError, message.str());
}

void ProcessGroupTPU::RunCollective(const char* name, const std::vector<at::Tensor>& representative,
                                    bool same_shape, const std::function<void()>& body) {
  ++collectives_;
  const bool across_ranks = size_ > 1;
  try {
    if (across_ranks) {
      const auto mine = FingerprintBytes(name, representative, same_shape);
      store_->set(EntryKey(collectives_, rank_), mine);
      if (check_across_ranks_) {
        CheckSameAcrossRanks(name, mine, same_shape);
        // Every rank has now left its entry for this collective, so each has read the previous
        // one's entries: ours can go. (Deleting it when done could race with a slower reader.)
        if (collectives_ > 1) store_->deleteKey(EntryKey(collectives_ - 1, rank_));
      }
    }
    body();
    if (across_ranks && !check_across_ranks_) store_->deleteKey(EntryKey(collectives_, rank_));
  } catch (const c10::ValueError&) {
    throw;
  } catch (const c10::DistError& error) {
    RaiseHostFailure(name, error);
  } catch (const c10::Error& error) {
    // Gloo reports timeouts as plain c10::Errors too; other c10::Errors are argument checks.
    if (std::string(error.what()).find("imed out") == std::string::npos) throw;
    RaiseHostFailure(name, error);
  } catch (const std::exception& error) {
    RaiseHostFailure(name, error);  // Gloo's own exceptions: a lost peer, a transport failure
  }
}

// ---- Collectives ----

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  RunCollective("broadcast", tensors, true, [&] {
    const bool root = rank_ == opts.rootRank;
    auto host = root ? ToHost(tensors) : HostLike(tensors);
    Wait(host_->broadcast(host, opts));
    if (!root) CopyBack(tensors, host);
  });
  return Done(c10d::OpType::BROADCAST, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(!opts.sparseIndices.has_value() && !tensors.empty() && !tensors[0].is_sparse(),
              "tpu: all_reduce of sparse tensors is not supported by the host-staged transport");
  RunCollective("all_reduce", tensors, true, [&] {
    auto host = ToHost(tensors);
    auto host_opts = opts;
    host_opts.reduceOp = PrepareReduce(opts.reduceOp, host);
    Wait(host_->allreduce(host, host_opts));
    FinishReduce(opts.reduceOp, host, size_);
    CopyBack(tensors, host);
  });
  return Done(c10d::OpType::ALLREDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  // One flat host buffer per call when the dtypes agree (DDP's buckets), else one per tensor.
  bool one_dtype = true;
  for (const auto& t : tensors)
    one_dtype = one_dtype && t.scalar_type() == tensors[0].scalar_type();
  if (!one_dtype) {
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> single = {tensor};
      allreduce(single, opts);
    }
    return Done(c10d::OpType::ALLREDUCE_COALESCED, tensors);
  }
  std::vector<at::Tensor> flat_views;
  for (const auto& tensor : tensors) flat_views.push_back(tensor.reshape({-1}));
  std::vector<at::Tensor> flat = {at::cat(flat_views)};
  allreduce(flat, opts);
  int64_t offset = 0;
  for (auto& tensor : tensors) {
    tensor.copy_(flat[0].narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
  return Done(c10d::OpType::ALLREDUCE_COALESCED, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  RunCollective("reduce", tensors, true, [&] {
    auto host = ToHost(tensors);
    auto host_opts = opts;
    host_opts.reduceOp = PrepareReduce(opts.reduceOp, host);
    Wait(host_->reduce(host, host_opts));
    if (rank_ != opts.rootRank) return;  // non-root inputs stay as they were
    FinishReduce(opts.reduceOp, host, size_);
    CopyBack(tensors, host);
  });
  return Done(c10d::OpType::REDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  RunCollective("all_gather", inputs, true, [&] {
    auto host_inputs = ToHost(inputs);
    auto host_outputs = HostLike(outputs);
    Wait(host_->allgather(host_outputs, host_inputs, opts));
    CopyBack(outputs, host_outputs);
  });
  return Done(c10d::OpType::ALLGATHER, Flatten(outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "tpu: all_gather_into_tensor: the output must have world_size (", size_,
              ") times the input's elements, got ", output.numel(), " and ", input.numel());
  RunCollective("all_gather_into_tensor", {input}, true, [&] {
    auto host_input = ToHost(input);
    auto host_output = HostLike(output);
    Wait(host_->_allgather_base(host_output, host_input, opts));
    output.copy_(host_output);
  });
  return Done(c10d::OpType::_ALLGATHER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<std::vector<at::Tensor>> one_output = {outputs[i]};
    std::vector<at::Tensor> one_input = {inputs[i]};
    allgather(one_output, one_input, opts);
  }
  return Done(c10d::OpType::ALLGATHER_COALESCED, Flatten(outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
  return Done(c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  RunCollective("gather", inputs, true, [&] {
    auto host_inputs = ToHost(inputs);
    auto host_outputs = HostLike(outputs);
    Wait(host_->gather(host_outputs, host_inputs, opts));
    if (rank_ == opts.rootRank) CopyBack(outputs, host_outputs);
  });
  return Done(c10d::OpType::GATHER, Flatten(outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  RunCollective("scatter", outputs, true, [&] {
    std::vector<std::vector<at::Tensor>> host_inputs;
    for (const auto& list : inputs) host_inputs.push_back(ToHost(list));
    auto host_outputs = HostLike(outputs);
    Wait(host_->scatter(host_outputs, host_inputs, opts));
    CopyBack(outputs, host_outputs);
  });
  return Done(c10d::OpType::SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  RunCollective("reduce_scatter", outputs, true, [&] {
    std::vector<std::vector<at::Tensor>> host_inputs;
    auto host_opts = opts;
    for (const auto& list : inputs) {
      host_inputs.push_back(ToHost(list));
      host_opts.reduceOp = PrepareReduce(opts.reduceOp, host_inputs.back());
    }
    auto host_outputs = HostLike(outputs);
    Wait(host_->reduce_scatter(host_outputs, host_inputs, host_opts));
    FinishReduce(opts.reduceOp, host_outputs, size_);
    CopyBack(outputs, host_outputs);
  });
  return Done(c10d::OpType::REDUCE_SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "tpu: reduce_scatter_tensor: the input must have world_size (", size_,
              ") times the output's elements, got ", input.numel(), " and ", output.numel());
  RunCollective("reduce_scatter_tensor", {input}, true, [&] {
    std::vector<at::Tensor> host_input = {ToHost(input)};
    std::vector<at::Tensor> host_output = {HostLike(output)};
    auto host_opts = opts;
    host_opts.reduceOp = PrepareReduce(opts.reduceOp, host_input);
    Wait(host_->_reduce_scatter_base(host_output[0], host_input[0], host_opts));
    FinishReduce(opts.reduceOp, host_output, size_);
    output.copy_(host_output[0]);
  });
  return Done(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  for (size_t i = 0; i < inputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
  return Done(c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  RunCollective("all_to_all_single", {input}, false, [&] {
    auto host_input = ToHost(input);
    auto host_output = HostLike(output);
    Wait(
        host_->alltoall_base(host_output, host_input, output_split_sizes, input_split_sizes, opts));
    output.copy_(host_output);
  });
  return Done(c10d::OpType::ALLTOALL_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  RunCollective("all_to_all", inputs, false, [&] {
    auto host_inputs = ToHost(inputs);
    auto host_outputs = HostLike(outputs);
    Wait(host_->alltoall(host_outputs, host_inputs, opts));
    CopyBack(outputs, host_outputs);
  });
  return Done(c10d::OpType::ALLTOALL, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::barrier(const c10d::BarrierOptions& opts) {
  RunCollective("barrier", {}, false, [&] { Wait(host_->barrier(opts)); });
  return Done(c10d::OpType::BARRIER, {});
}

// ---- Point to point: no fingerprint (only two ranks take part) ----

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                     int tag) {
  auto host = ToHost(tensors);
  try {
    Wait(host_->send(host, dst_rank, tag));
  } catch (const c10::Error& error) {
    C10_THROW_ERROR(DistBackendError,
                    "tpu: send to rank " + std::to_string(dst_rank) + " failed: " + error.what());
  }
  return Done(c10d::OpType::SEND, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                     int tag) {
  auto host = HostLike(tensors);
  try {
    Wait(host_->recv(host, src_rank, tag));
  } catch (const c10::Error& error) {
    C10_THROW_ERROR(DistBackendError,
                    "tpu: recv from rank " + std::to_string(src_rank) + " failed: " + error.what());
  }
  CopyBack(tensors, host);
  return c10::make_intrusive<CompletedWork>(c10d::OpType::RECV, tensors, src_rank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTPU::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
  auto host = HostLike(tensors);
  auto work = host_->recvAnysource(host, tag);
  Wait(work);
  CopyBack(tensors, host);
  return c10::make_intrusive<CompletedWork>(c10d::OpType::RECVANYSOURCE, tensors,
                                            work->sourceRank());
}

}  // namespace torch_tpu::distributed
