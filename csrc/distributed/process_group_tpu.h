// The c10d backend of the tpu device. Its transport stages tensors through the host: each
// collective copies its tpu inputs to CPU tensors, runs the same collective on a Gloo backend
// built from the same store, and copies the results into the tpu outputs' storages (so views
// of larger tensors see them). This is the transport when every device is addressable by this
// process, which is the CPU plugin's case.
//
// Collectives run to completion before they return, so Work and its future are already done;
// errors surface at the call. Before each collective every rank leaves a fingerprint (kind,
// dtype, shape) in the store and compares the others' with its own, so a mismatch is an error on
// every rank instead of a wrong result or a hang; the entries left while a collective waits name
// the ranks that never joined it when it times out. Store entries cost microseconds where one
// more Gloo exchange would cost milliseconds.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace torch_tpu::distributed {

class ProcessGroupTPU final : public c10d::Backend {
 public:
  // `host` is a Gloo backend over the same ranks; `store` is this group's (prefixed) store.
  ProcessGroupTPU(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                  c10::intrusive_ptr<c10d::Backend> host, std::chrono::milliseconds timeout,
                  bool check_across_ranks);

  const std::string getBackendName() const override { return "tpu"; }
  bool supportsCoalescing() const override { return false; }
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Runs `body` as collective `name`: records progress in the store, checks `representative`
  // (when given) against the other ranks, and turns a host failure into an error that names
  // the collective and the ranks that never joined it.
  void RunCollective(const char* name, const std::vector<at::Tensor>& representative,
                     bool same_shape, const std::function<void()>& body);
  // Every rank's fingerprint of this collective, read from the store, must equal `mine`.
  void CheckSameAcrossRanks(const char* name, const std::vector<uint8_t>& mine, bool same_shape);
  [[noreturn]] void RaiseHostFailure(const char* name, const std::exception& error);
  // Waits for a host work item, which Gloo bounds by the group's timeout.
  static void Wait(const c10::intrusive_ptr<c10d::Work>& work);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> host_;
  std::chrono::milliseconds timeout_;
  bool check_across_ranks_;
  uint64_t collectives_ = 0;  // collectives started by this rank, in this group
};

}  // namespace torch_tpu::distributed
