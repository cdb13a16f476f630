// torch.ops.neuron's random-number ops (see Platform.cpp): the cores' default generators, for
// torch.neuron's random functions (neuron/random.py), and the source of random numbers
// (torch_neuronx._rng).

#include "runtime/Generator.h"

#include <torch/library.h>

#include <mutex>
#include <string>

namespace neuron {
namespace {

void manual_seed(int64_t device, int64_t seed) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(static_cast<uint64_t>(seed));
}

int64_t seed(int64_t device) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<int64_t>(gen.seed());
}

int64_t initial_seed(int64_t device) {
  return static_cast<int64_t>(
      default_generator(static_cast<c10::DeviceIndex>(device)).current_seed());
}

at::Tensor get_rng_state(int64_t device) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::Tensor(gen.get_state());
}

void set_rng_state(int64_t device, const at::Tensor& state) {
  auto gen = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::string rng_source_name() {
  return rng_source() == RngSource::Cpu ? "cpu" : "device";
}

void set_rng_source_name(c10::string_view name) {
  TORCH_CHECK(name == "cpu" || name == "device", "'", name,
      "' is not a random source; use 'device' (each core's own generator, as on Trainium) or "
      "'cpu' (the CPU's default generator)");
  set_rng_source(name == "cpu" ? RngSource::Cpu : RngSource::Device);
}

TORCH_LIBRARY_FRAGMENT(neuron, m) {
  m.def("manual_seed(int device, int seed) -> ()", &manual_seed);
  m.def("seed(int device) -> int", &seed);
  m.def("initial_seed(int device) -> int", &initial_seed);
  m.def("get_rng_state(int device) -> Tensor", &get_rng_state);
  m.def("set_rng_state(int device, Tensor state) -> ()", &set_rng_state);
  m.def("rng_source() -> str", &rng_source_name);
  m.def("set_rng_source(str source) -> ()", &set_rng_source_name);
}

} // namespace
} // namespace neuron
