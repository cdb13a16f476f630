#include "distributed/NeuronBackend.h"

#include "runtime/Trace.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace neuron::dist {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// neuron::as_cpu lives in the core library; reaching it through the dispatcher keeps this
// module independent of the core's internals.
at::Tensor as_cpu(const at::Tensor& t) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("neuron::as_cpu", "")
                       .typed<at::Tensor(const at::Tensor&)>();
  // Backend methods can be called straight from Python with autograd on; an alias must not
  // join the autograd graph.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(t);
}

// Completions running on gloo's threads. The reference a completion holds to its work may be
// the last one to the caller's tensors, and dropping that calls into Python; during interpreter
// shutdown such a thread would be killed there, aborting the process. The Python layer waits
// for these to drain, without the GIL, before the interpreter shuts down.
std::mutex in_flight_mutex;
std::condition_variable in_flight_cv;
int64_t in_flight = 0;

void begin_completion() {
  std::lock_guard<std::mutex> lock(in_flight_mutex);
  ++in_flight;
}

void end_completion() {
  {
    std::lock_guard<std::mutex> lock(in_flight_mutex);
    --in_flight;
  }
  in_flight_cv.notify_all();
}

// The core library's profiler hooks (runtime/Trace.h), reached once through the dispatcher.
const neuron::trace::Api& trace_api() {
  static const auto* api = reinterpret_cast<const neuron::trace::Api*>(c10::Dispatcher::singleton()
          .findSchemaOrThrow("neuron::trace_api", "")
          .typed<int64_t()>()
          .call());
  return *api;
}

// Starts the device activity of a collective on `outputs`' core when a profiler collects; 0
// otherwise (and for collectives with no neuron tensor, such as barrier).
uint64_t begin_trace(OpType type, const std::vector<at::Tensor>& outputs) {
  const auto& api = trace_api();
  if (api.collecting->load(std::memory_order_relaxed) == 0) {
    return 0;
  }
  int32_t device = -1;
  int64_t bytes = 0;
  for (const auto& t : outputs) {
    if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
      device = device < 0 ? t.device().index() : device;
      bytes += static_cast<int64_t>(t.numel() * t.element_size());
    }
  }
  if (device < 0) {
    return 0;
  }
  auto name = "nc::cc " + c10d::opTypeToString(type);
  return api.begin(
      name.c_str(), /*kernel*/ 0, device, neuron::trace::kCollectiveStream, "collective", bytes);
}

std::string message(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

std::string message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return message(e);
  } catch (...) {
    return "unknown error";
  }
}

std::exception_ptr backend_error(const std::string& text) {
  return std::make_exception_ptr(
      c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, text));
}

template <typename T>
std::vector<T> flatten(const std::vector<std::vector<T>>& lists) {
  std::vector<T> flat;
  for (const auto& list : lists) {
    flat.insert(flat.end(), list.begin(), list.end());
  }
  return flat;
}

// Gloo has no AVG or PREMUL_SUM. Both run as SUM: PREMUL_SUM scales the inputs first, AVG
// divides the outputs once the sum has landed (see NeuronWork::complete).
ReduceOp gloo_op(const ReduceOp& op) {
  bool summed = op.op_ == ReduceOp::AVG || op.op_ == ReduceOp::PREMUL_SUM;
  return summed ? ReduceOp(ReduceOp::SUM) : op;
}

// Scales `inputs` for PREMUL_SUM: in place for collectives whose inputs are their outputs,
// into new tensors otherwise, so that the caller's inputs stay untouched.
void premultiply(std::vector<at::Tensor>& inputs, const ReduceOp& op, bool in_place) {
  if (op.op_ != ReduceOp::PREMUL_SUM) {
    return;
  }
  TORCH_CHECK(op.supplement_, "PREMUL_SUM needs a factor; use dist._make_nccl_premul_sum");
  auto* factor = static_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  for (auto& t : inputs) {
    if (factor->tensor_factor.defined()) {
      at::Tensor f = as_cpu(factor->tensor_factor).reshape({});
      t = in_place ? t.mul_(f) : t.mul(f);
    } else {
      t = in_place ? t.mul_(factor->double_factor) : t.mul(factor->double_factor);
    }
  }
}

// The tensor of a whole-group collective (all-gather's output, reduce-scatter's input) in the
// one layout gloo takes: the ranks' parts concatenated along dim 0. Torch documents the
// stacked layout too, and NCCL takes any contiguous tensor of the right size (accelerate
// passes a flat one), so every such tensor is viewed that way.
at::Tensor as_concatenated(const at::Tensor& whole, const at::Tensor& part, int64_t world) {
  if (part.dim() == 0 || whole.numel() != world * part.numel() || !whole.is_contiguous()) {
    return whole;
  }
  auto shape = part.sizes().vec();
  shape[0] *= world;
  return whole.view(shape);
}

std::vector<at::Tensor> as_concatenated(
    std::vector<at::Tensor> wholes, const std::vector<at::Tensor>& parts, int64_t world) {
  for (size_t i = 0; i < wholes.size() && i < parts.size(); ++i) {
    wholes[i] = as_concatenated(wholes[i], parts[i], world);
  }
  return wholes;
}

// What every reduction does before gloo runs it: PREMUL_SUM scales `inputs`, AVG marks
// `averaged` for division once the sum has landed, and gloo gets SUM for both.
template <typename Options>
Options for_gloo(HostArgs& host, const Options& opts,
    const std::vector<std::vector<at::Tensor>*>& inputs, bool in_place,
    const std::vector<at::Tensor>& averaged) {
  for (auto* list : inputs) {
    premultiply(*list, opts.reduceOp, in_place);
  }
  if (opts.reduceOp.op_ == ReduceOp::AVG) {
    host.averaged = averaged;
  }
  auto o = opts;
  o.reduceOp = gloo_op(opts.reduceOp);
  return o;
}

} // namespace

// Ops queued by adaptive eager execution must have written what a collective reads.
void run_queue() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("neuron::run_queue", "")
                       .typed<void(c10::string_view)>();
  op.call("collective");
}

at::Tensor HostArgs::operator()(const at::Tensor& t) {
  if (!t.defined()) {
    return t;
  }
  if (!device_) {
    run_queue();
  }
  TORCH_CHECK(!device_ || *device_ == t.device(), "all tensors must be on one device, got ",
      *device_, " and ", t.device());
  device_ = t.device();
  return t.is_cpu() ? t : as_cpu(t);
}

std::vector<at::Tensor> HostArgs::operator()(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> host;
  host.reserve(ts.size());
  for (const auto& t : ts) {
    host.push_back((*this)(t));
  }
  return host;
}

std::vector<std::vector<at::Tensor>> HostArgs::operator()(
    const std::vector<std::vector<at::Tensor>>& ts) {
  std::vector<std::vector<at::Tensor>> host;
  host.reserve(ts.size());
  for (const auto& list : ts) {
    host.push_back((*this)(list));
  }
  return host;
}

NeuronWork::NeuronWork(int rank, OpType type, std::string label, uint64_t seq,
    std::vector<at::Tensor> outputs, std::vector<at::Tensor> averaged, int64_t group_size)
    : c10d::Work(rank, type),
      label_(std::move(label)),
      seq_(seq),
      outputs_(std::move(outputs)),
      averaged_(std::move(averaged)),
      group_size_(group_size),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

void NeuronWork::attach(const c10::intrusive_ptr<NeuronWork>& work, WorkPtr gloo) {
  work->gloo_ = gloo;
  c10::intrusive_ptr<c10::ivalue::Future> done;
  try {
    done = gloo->getFuture();
  } catch (const c10::Error&) {
    // Gloo's send, recv and reduce_scatter works have no future and finish only inside wait().
  }
  begin_completion();
  if (done) {
    done->addCallback([work = work](c10::ivalue::Future& f) mutable {
      work->complete(f.exception_ptr());
      work.reset();
      end_completion();
    });
    return;
  }
  // A thread waits for such a work, so that isCompleted() and the future stay asynchronous.
  std::thread([work = work, gloo]() mutable {
    std::exception_ptr error;
    try {
      if (!gloo->wait()) {
        error = backend_error("aborted");
      }
    } catch (...) {
      error = std::current_exception();
    }
    work->complete(error);
    work.reset();
    gloo.reset();
    end_completion();
  }).detach();
}

bool wait_for_completions(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(in_flight_mutex);
  return in_flight_cv.wait_for(lock, timeout, [] { return in_flight == 0; });
}

void NeuronWork::complete(std::exception_ptr error) {
  if (!error) {
    try {
      for (const auto& sum : averaged_) {
        at::Tensor t = sum;
        if (at::isIntegralType(t.scalar_type(), /*includeBool=*/true)) {
          t.div_(group_size_, "trunc");
        } else {
          t.div_(group_size_);
        }
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) {
    error = backend_error(c10::str(label_, " failed: ", message(error)));
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  if (trace_token_) {
    trace_api().end(trace_token_);
  }
  finish(error);
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [this] { return completed_; };
  if (timeout == kNoTimeout) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, timeout, done)) {
    std::rethrow_exception(backend_error(
        c10::str(label_, " timed out after ", timeout.count(), " ms in Work.wait()")));
  }
  if (exception_) {
    std::rethrow_exception(exception_);
  }
  return true;
}

std::vector<at::Tensor> NeuronWork::result() {
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() {
  return future_;
}

int NeuronWork::sourceRank() const {
  return gloo_->sourceRank();
}

uint64_t NeuronWork::getSequencenumber() const {
  return seq_;
}

NeuronBackend::NeuronBackend(c10::intrusive_ptr<c10d::Backend> gloo)
    : c10d::Backend(gloo->getRank(), gloo->getSize()), gloo_(std::move(gloo)) {
  trace_api(); // looked up now, so that no profile records the lookup as an op
  init();
}

const std::string NeuronBackend::getBackendName() const {
  return "neuron";
}

void NeuronBackend::setTimeout(std::chrono::milliseconds timeout) {
  gloo_->setTimeout(timeout);
}

void NeuronBackend::setGroupUid(const std::string& pg_uid) {
  c10d::Backend::setGroupUid(pg_uid);
  gloo_->setGroupUid(pg_uid);
}

template <typename Launch>
WorkPtr NeuronBackend::run(
    OpType type, std::vector<at::Tensor> outputs, int peer, Launch&& launch) {
  uint64_t seq = ++seq_;
  std::string label = c10::str("[Rank ", rank_, "] neuron ", c10d::opTypeToString(type),
      peer >= 0 ? c10::str(" with peer rank ", peer) : std::string(), " (SeqNum=", seq, ", group '",
      pg_uid_, "' of ", size_, " ranks)");
  HostArgs host;
  WorkPtr gloo;
  uint64_t token = begin_trace(type, outputs);
  try {
    gloo = launch(host);
  } catch (const c10::Error& e) {
    trace_api().end(token);
    // Argument checks, ours and gloo's.
    TORCH_CHECK(false, label, ": ", e.what_without_backtrace());
  } catch (const std::exception& e) {
    trace_api().end(token);
    // The transport refused, e.g. a connection an earlier timeout or a dead peer closed.
    std::rethrow_exception(backend_error(c10::str(label, " failed: ", e.what())));
  }
  auto work = c10::make_intrusive<NeuronWork>(
      rank_, type, std::move(label), seq, std::move(outputs), std::move(host.averaged), size_);
  work->set_trace_token(token);
  NeuronWork::attach(work, std::move(gloo));
  return work;
}

WorkPtr NeuronBackend::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  return run(OpType::BROADCAST, tensors, -1, [&](HostArgs& host) {
    auto t = host(tensors);
    return gloo_->broadcast(t, opts);
  });
}

WorkPtr NeuronBackend::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return run(OpType::ALLREDUCE, tensors, -1, [&](HostArgs& host) {
    auto t = host(tensors);
    return gloo_->allreduce(t, for_gloo(host, opts, {&t}, /*in_place=*/true, t));
  });
}

WorkPtr NeuronBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return run(OpType::ALLREDUCE_COALESCED, tensors, -1, [&](HostArgs& host) {
    auto t = host(tensors);
    return gloo_->allreduce_coalesced(t, for_gloo(host, opts, {&t}, /*in_place=*/true, t));
  });
}

WorkPtr NeuronBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  return run(OpType::REDUCE, tensors, -1, [&](HostArgs& host) {
    auto t = host(tensors);
    // Only the root receives the sum.
    auto averaged = rank_ == opts.rootRank ? t : std::vector<at::Tensor>{};
    return gloo_->reduce(t, for_gloo(host, opts, {&t}, /*in_place=*/true, averaged));
  });
}

WorkPtr NeuronBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  return run(OpType::ALLGATHER, flatten(outputs), -1, [&](HostArgs& host) {
    auto out = host(outputs);
    auto in = host(inputs);
    return gloo_->allgather(out, in, opts);
  });
}

WorkPtr NeuronBackend::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return run(OpType::_ALLGATHER_BASE, {output}, -1, [&](HostArgs& host) {
    auto in = host(input);
    auto out = as_concatenated(host(output), in, size_);
    return gloo_->_allgather_base(out, in, opts);
  });
}

WorkPtr NeuronBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  return run(OpType::COALESCED, outputs, -1, [&](HostArgs& host) {
    auto in = host(inputs);
    auto out = as_concatenated(host(outputs), in, size_);
    return gloo_->allgather_into_tensor_coalesced(out, in, opts);
  });
}

WorkPtr NeuronBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  return run(OpType::GATHER, flatten(outputs), -1, [&](HostArgs& host) {
    auto out = host(outputs);
    auto in = host(inputs);
    return gloo_->gather(out, in, opts);
  });
}

WorkPtr NeuronBackend::scatter(std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs, const c10d::ScatterOptions& opts) {
  return run(OpType::SCATTER, outputs, -1, [&](HostArgs& host) {
    auto out = host(outputs);
    auto in = host(inputs);
    return gloo_->scatter(out, in, opts);
  });
}

WorkPtr NeuronBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs, const c10d::ReduceScatterOptions& opts) {
  return run(OpType::REDUCE_SCATTER, outputs, -1, [&](HostArgs& host) {
    auto out = host(outputs);
    auto in = host(inputs);
    std::vector<std::vector<at::Tensor>*> lists;
    for (auto& list : in) {
      lists.push_back(&list);
    }
    return gloo_->reduce_scatter(out, in, for_gloo(host, opts, lists, /*in_place=*/false, out));
  });
}

WorkPtr NeuronBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return run(OpType::_REDUCE_SCATTER_BASE, {output}, -1, [&](HostArgs& host) {
    std::vector<at::Tensor> out{host(output)};
    std::vector<at::Tensor> in{as_concatenated(host(input), out[0], size_)};
    auto o = for_gloo(host, opts, {&in}, /*in_place=*/false, out);
    return gloo_->_reduce_scatter_base(out[0], in[0], o);
  });
}

WorkPtr NeuronBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  return run(OpType::REDUCE_SCATTER_TENSOR_COALESCED, outputs, -1, [&](HostArgs& host) {
    auto out = host(outputs);
    auto in = as_concatenated(host(inputs), out, size_);
    return gloo_->reduce_scatter_tensor_coalesced(
        out, in, for_gloo(host, opts, {&in}, /*in_place=*/false, out));
  });
}

WorkPtr NeuronBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
    std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
    const c10d::AllToAllOptions& opts) {
  return run(OpType::ALLTOALL_BASE, {output}, -1, [&](HostArgs& host) {
    auto out = host(output);
    auto in = host(input);
    return gloo_->alltoall_base(out, in, output_splits, input_splits, opts);
  });
}

WorkPtr NeuronBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  return run(OpType::ALLTOALL, outputs, -1, [&](HostArgs& host) {
    auto out = host(outputs);
    auto in = host(inputs);
    return gloo_->alltoall(out, in, opts);
  });
}

WorkPtr NeuronBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return run(OpType::SEND, tensors, dst, [&](HostArgs& host) {
    auto t = host(tensors);
    return gloo_->send(t, dst, tag);
  });
}

WorkPtr NeuronBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return run(OpType::RECV, tensors, src, [&](HostArgs& host) {
    auto t = host(tensors);
    return gloo_->recv(t, src, tag);
  });
}

WorkPtr NeuronBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return run(OpType::RECVANYSOURCE, tensors, -1, [&](HostArgs& host) {
    auto t = host(tensors);
    return gloo_->recvAnysource(t, tag);
  });
}

WorkPtr NeuronBackend::barrier(const c10d::BarrierOptions& opts) {
  return run(OpType::BARRIER, {}, -1, [&](HostArgs&) { return gloo_->barrier(opts); });
}

} // namespace neuron::dist
