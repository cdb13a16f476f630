#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron {

struct RouteCounts {
  int64_t native = 0;
  int64_t cpu_fallback = 0;
  int64_t mask_dependent = 0;
  int64_t host_composite = 0;
};

// Where ops run, as the op policy (torch_neuronx/op_policy.json) names them.
struct Routes {
  // Always the CPU-fallback tier.
  std::vector<std::string> cpu_fallback;
  // The CPU-fallback tier when indexed with a boolean mask (the result shape then depends on
  // the data); natively otherwise.
  std::vector<std::string> mask_dependent;
  // Composites that pick a kernel by device type: the host-kernel path, or they would never
  // reach a CPU kernel.
  std::vector<std::string> device_selecting;
  // Composites that run their CPU implementation with autograd (HostComposites.h).
  std::vector<std::string> host_composite;
};

// Registers the host-kernel path for the ops that need it; runs once per process.
RouteCounts route_ops(const Routes& routes);

// Gives other libraries' ops ("namespace::name" or "namespace::name.overload") a neuron kernel:
// the host-kernel path on device memory, counted as the op's native calls. For ops registered
// for every device (a catch-all kernel), which would otherwise read device memory by raw
// pointer, unseen by the device. Returns how many ops it registered (ops that already have a
// neuron kernel are left as they are).
int64_t route_device_kernels(const std::vector<std::string>& ops);

} // namespace neuron
