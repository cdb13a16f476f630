#pragma once
// The one mechanism that executes ATen ops on the emulated core: host kernels on device memory.

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace neuron {

// Native tier: the CPU kernel runs directly on device memory (zero copy).
void run_native(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The native tier, never queued (aten/OpQueue.h): how the queue itself runs an op.
void run_now(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// CPU-fallback tier: inputs are copied to the host, the CPU kernel runs, results are copied back.
void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Namespaces besides aten whose ops run natively when they reach the host-kernel path without a
// route (PyTorch's own; op_policy.json, library_ops). Ops of other namespaces with a CPU kernel
// (other libraries' ops) take the CPU-fallback tier. The op policy names them at load; a library
// loaded later (vLLM's _C) is added at run time, and ops already run take the new tier.
void add_native_namespaces(const std::vector<std::string>& namespaces);
// Whether the op called `name` ("ns::op" or "ns::op.overload") takes that tier on neuron
// tensors: it reaches the host-kernel path (no neuron or composite kernel) and is another
// library's op. The rule the fallback applies, for Python to ask (compiled graphs' reports).
bool takes_library_fallback(const std::string& name);
// Reports one call of a CPU-fallback-tier op (eagerly or inside a compiled graph): counts it,
// warns once per op, and raises when NEURON_FALLBACK_ENABLED=0.
void announce_fallback(const std::string& op, bool compiled);

} // namespace neuron
