#pragma once
// Host code running "as NeuronCore N": the one scope that the host-kernel path, compiled graphs
// and the host composites (RNNs, SDPA) all enter.

#include "runtime/Allocator.h"
#include "runtime/Generator.h"

#include <cstdint>
#include <optional>

namespace neuron {

class CoreScope {
 public:
  // With `pool`, CPU allocations come from the core's memory pool, so host kernels write their
  // results straight into device memory. With `rng`, the default CPU generator is the core's,
  // for kernels that draw random numbers without a generator argument; it is process-wide, so
  // only ops that need it swap it.
  CoreScope(c10::DeviceIndex device, bool pool, bool rng);
  ~CoreScope();
  CoreScope(const CoreScope&) = delete;
  CoreScope& operator=(const CoreScope&) = delete;

 private:
  c10::DeviceIndex device_;
  std::optional<DevicePoolScope> pool_;
  std::optional<ScopedDefaultCPUGenerator> rng_;
  int64_t busy_since_ns_ = -1; // set when this scope counts busy time (see busy_ns)
};

// Nanoseconds core `device` has spent running work (inside an outermost CoreScope on some
// thread), counted from the first call of busy_ns on: until torch.neuron.utilization asks,
// ops pay one flag test.
int64_t busy_ns(c10::DeviceIndex device);

} // namespace neuron
