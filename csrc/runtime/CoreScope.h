#pragma once
// Host code running "as NeuronCore N": the one scope that the host-kernel path, compiled graphs
// and the host composites (RNNs, SDPA) all enter.

#include "runtime/Allocator.h"
#include "runtime/Generator.h"

#include <optional>

namespace neuron {

class CoreScope {
 public:
  // With `pool`, CPU allocations come from the core's memory pool, so host kernels write their
  // results straight into device memory. With `rng`, the default CPU generator is the core's,
  // for kernels that draw random numbers without a generator argument; it is process-wide, so
  // only ops that need it swap it.
  CoreScope(c10::DeviceIndex device, bool pool, bool rng);

 private:
  std::optional<DevicePoolScope> pool_;
  std::optional<ScopedDefaultCPUGenerator> rng_;
};

} // namespace neuron
