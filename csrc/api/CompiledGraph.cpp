// torch.ops.neuron's ops for compiled graphs (see Platform.cpp): host views of device memory,
// the core a graph runs as, the 64-bit policy inside a graph, and what a graph reports to
// `torchneuron check` and parity.

#include "aten/Fallback.h"
#include "aten/HostView.h"
#include "aten/Policy.h"
#include "aten/Upcalls.h"
#include "runtime/Boundary.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/Trace.h"

#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>

namespace neuron {
namespace {

// Also the c10d backend's and printing's way to device memory.
at::Tensor as_cpu(const at::Tensor& self) {
  reach(Boundary::HostAccess);
  return host_view(self);
}

at::Tensor as_cpu_identity(const at::Tensor& self) {
  return self.alias();
}

// A compiled graph's result, computed on the host, as a tensor of neuron `device`.
at::Tensor to_device_alias(const at::Tensor& host, int64_t device) {
  auto index = check_device(static_cast<c10::DeviceIndex>(device));
  return tensor_over(device_alias(host.storage(), index), host, c10::DispatchKey::PrivateUse1);
}

// Compiled graphs run all their kernels on the host, as the core (see CoreScope); to a profiler
// each call of a graph is one kernel of the core, named after the graph.
struct GraphCall {
  CoreScope core;
  trace::Span span;
};

thread_local std::vector<std::unique_ptr<GraphCall>> core_scopes;

void enter_core(int64_t device, c10::string_view graph) {
  reach(Boundary::CompiledGraph);
  auto index = check_device(static_cast<c10::DeviceIndex>(device));
  auto call = std::unique_ptr<GraphCall>(new GraphCall{CoreScope(index, true, true), {}});
  if (trace::collecting()) {
    call->span.begin(trace::Kind::Kernel, index, "compiled_graph",
        "nc::graph " + (graph.empty() ? std::string("compiled") : std::string(graph)));
  }
  core_scopes.push_back(std::move(call));
}

void exit_core() {
  TORCH_CHECK(!core_scopes.empty(), "neuron::exit_core called without neuron::enter_core");
  core_scopes.pop_back();
}

// The compiler inserts this after each op that yields 64-bit values, as eager applies the
// policy after every neuron op. The result takes the strides eager gives the op's result when
// the compiler knows them (static shapes): Inductor may lay out the op's result otherwise on
// size-1 dimensions.
at::Tensor narrow_64bit(
    const at::Tensor& self, c10::string_view source, at::OptionalIntArrayRef stride) {
  auto out =
      stride ? at::empty_strided(self.sizes(), *stride, self.options()) : at::empty_like(self);
  out.copy_(self);
  narrow_64bit_values(out, std::string(source));
  return out;
}

at::Tensor narrow_64bit_meta(
    const at::Tensor& self, c10::string_view, at::OptionalIntArrayRef stride) {
  return stride ? at::empty_strided_symint(
                      self.sym_sizes(), c10::fromIntArrayRefSlow(*stride), self.options())
                : at::empty_like(self);
}

// Reports the CPU-fallback-tier ops a compiled graph is about to run, once per call each.
void record_compiled_fallback(std::vector<std::string> ops) {
  for (const auto& op : ops) {
    announce_fallback(op, /*compiled=*/true);
    observe("fallback", op, "compiled", {0, 0});
  }
}

// Reports a call of a compiled graph that draws random numbers (its seeds come from the core's
// default generator, or the CPU's under TORCH_NEURONX_RNG=cpu), for check and parity.
void record_compiled_random(c10::string_view graph) {
  if (observing()) {
    observe("random", "compiled graph " + std::string(graph),
        rng_source() == RngSource::Cpu ? "cpu" : "device", {0});
  }
}

TORCH_LIBRARY_FRAGMENT(neuron, m) {
  m.def("as_cpu(Tensor(a) self) -> Tensor(a)");
  m.def("to_device_alias(Tensor host, int device) -> Tensor", &to_device_alias);
  m.def("enter_core(int device, str graph=\"\") -> ()", &enter_core);
  m.def("exit_core() -> ()", &exit_core);
  m.def("narrow_64bit(Tensor self, str source, int[]? stride=None) -> Tensor");
  m.def("record_compiled_fallback(str[] ops) -> ()", &record_compiled_fallback);
  m.def("record_compiled_random(str graph) -> ()", &record_compiled_random);
}

TORCH_LIBRARY_IMPL(neuron, PrivateUse1, m) {
  m.impl("as_cpu", TORCH_FN(as_cpu));
}

TORCH_LIBRARY_IMPL(neuron, CPU, m) {
  m.impl("as_cpu", TORCH_FN(as_cpu_identity));
  m.impl("narrow_64bit", TORCH_FN(narrow_64bit));
}

TORCH_LIBRARY_IMPL(neuron, Meta, m) {
  m.impl("narrow_64bit", TORCH_FN(narrow_64bit_meta));
}

} // namespace
} // namespace neuron
