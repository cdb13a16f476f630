#pragma once
// Composite ops that choose their kernels by device type (RNNs, scaled_dot_product_attention),
// run as on CPU; the op policy names them (host_composites) and Routing.cpp registers this.

#include <ATen/core/dispatch/Dispatcher.h>

namespace neuron {

// Runs the op's CPU implementation, autograd included, on host views of its neuron tensors.
void run_like_cpu(
    const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack);

} // namespace neuron
