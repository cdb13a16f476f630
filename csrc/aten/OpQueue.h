#pragma once
// Adaptive eager execution: elementwise ops are queued instead of run, and a run of queued ops
// executes as one fused kernel, chunk by chunk, with the exact bits of running them one by one.
// Only ops (and dtypes) proven bit-identical under chunking join the queue (op_policy.json,
// "fusable"); anything else, and every boundary (runtime/Boundary.h), runs the queue first.

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace neuron::queue {

// Queues `op` when adaptive eager is on and the op and its arguments may join the queue, and
// says whether it did. Otherwise runs the queued work first, so that `op` sees its results.
bool record(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// TORCH_NEURONX_ENABLE_CONCATENATION, and the runtime switch over it.
void set_enabled(bool on);
bool enabled();
// TORCH_NEURONX_ENABLE_PROLOGUE: transposed and other strided views join the queue, their
// values gathered chunk by chunk when the fused kernel runs instead of copied beforehand.
void set_prologue(bool on);
bool prologue();
// The most ops one queue holds (TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT).
void set_limit(int64_t ops);
int64_t limit();

// The ops, as "name.overload", each with the dtype ("Float", "BFloat16", ...) it is proven for.
void set_fusable(const std::vector<std::string>& ops, const std::vector<std::string>& dtypes);

} // namespace neuron::queue
