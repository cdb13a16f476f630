#pragma once
// The "neuron" c10d backend: collectives on NeuronCore memory, carried by gloo's TCP transport.
//
// Every collective hands gloo zero-copy host aliases of its tensors, so gloo reads and writes
// device memory directly; the Work it returns completes with the caller's own tensors.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <optional>

namespace neuron::dist {

// Host aliases of one collective's tensors; all of them must live on one device.
class HostArgs {
 public:
  at::Tensor operator()(const at::Tensor& t);
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& ts);
  std::vector<std::vector<at::Tensor>> operator()(const std::vector<std::vector<at::Tensor>>& ts);

  // Host outputs that hold sums and become means once gloo finishes (ReduceOp.AVG).
  std::vector<at::Tensor> averaged;

 private:
  std::optional<c10::Device> device_;
};

// Waits until no collective is completing on a transport thread; false on timeout.
bool wait_for_completions(std::chrono::milliseconds timeout);

// A collective in flight: completes, with the caller's tensors as its value, when gloo's does.
class NeuronWork final : public c10d::Work {
 public:
  NeuronWork(int rank, c10d::OpType type, std::string label, uint64_t seq,
      std::vector<at::Tensor> outputs, std::vector<at::Tensor> averaged, int64_t group_size);

  // Hooks this work to gloo's: through its future, or a waiting thread when it has none.
  static void attach(
      const c10::intrusive_ptr<NeuronWork>& work, c10::intrusive_ptr<c10d::Work> gloo);

  // The profiler's device activity for this collective (runtime/Trace.h), ended on completion.
  void set_trace_token(uint64_t token) { trace_token_ = token; }

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  uint64_t getSequencenumber() const override;

 private:
  void complete(std::exception_ptr error);

  const std::string label_;
  const uint64_t seq_;
  const std::vector<at::Tensor> outputs_;
  const std::vector<at::Tensor> averaged_;
  const int64_t group_size_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  c10::intrusive_ptr<c10d::Work> gloo_;
  uint64_t trace_token_ = 0;
};

class NeuronBackend final : public c10d::Backend {
 public:
  explicit NeuronBackend(c10::intrusive_ptr<c10d::Backend> gloo);

  const std::string getBackendName() const override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setGroupUid(const std::string& pg_uid) override;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs, const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // The one path every operation takes: `launch` builds host aliases through HostArgs and
  // starts the gloo operation; errors are reported under the operation's name and rank.
  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> run(
      c10d::OpType type, std::vector<at::Tensor> outputs, int peer, Launch&& launch);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  std::atomic<uint64_t> seq_{0};
};

} // namespace neuron::dist
