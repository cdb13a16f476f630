#include "runtime/CoreScope.h"

namespace neuron {

CoreScope::CoreScope(c10::DeviceIndex device, bool pool, bool rng) {
  if (pool) {
    pool_.emplace(device);
  }
  if (rng) {
    rng_.emplace(host_generator(std::nullopt, device));
  }
}

} // namespace neuron
