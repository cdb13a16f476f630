#include "runtime/Generator.h"

#include "runtime/Device.h"

#include <ATen/core/GeneratorForPrivateuseone.h>

#include "runtime/Config.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace neuron {
namespace {

RngSource read_rng_source() {
  auto name = config::text(config::kRngSource);
  if (name == "device") {
    return RngSource::Device;
  }
  TORCH_CHECK(name == "cpu", "TORCH_NEURONX_RNG='", name,
      "' is not a random source; use device (each core's own generator, as on Trainium) or cpu "
      "(the CPU's default generator, for runs that must draw the CPU's numbers)");
  return RngSource::Cpu;
}

std::atomic<RngSource>& source_slot() {
  static std::atomic<RngSource> source{read_rng_source()};
  return source;
}

} // namespace

RngSource rng_source() {
  return source_slot().load(std::memory_order_relaxed);
}

void set_rng_source(RngSource source) {
  source_slot().store(source);
}

NeuronGenerator::NeuronGenerator(c10::DeviceIndex device, bool is_default)
    : c10::GeneratorImpl(
          c10::Device(kNeuron, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::detail::createCPUGenerator(c10::default_rng_seed_val)),
      is_default_(is_default) {}

const at::Generator& NeuronGenerator::host() const {
  if (is_default_ && rng_source() == RngSource::Cpu) {
    return at::detail::getDefaultCPUGenerator();
  }
  return host_;
}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  host().unsafeGetGeneratorImpl()->set_current_seed(seed);
}

void NeuronGenerator::set_offset(uint64_t offset) {
  host().unsafeGetGeneratorImpl()->set_offset(offset);
}

uint64_t NeuronGenerator::get_offset() const {
  return host().get_offset();
}

uint64_t NeuronGenerator::current_seed() const {
  return host().current_seed();
}

uint64_t NeuronGenerator::seed() {
  return host().unsafeGetGeneratorImpl()->seed();
}

void NeuronGenerator::set_state(const c10::TensorImpl& state) {
  host().unsafeGetGeneratorImpl()->set_state(state);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  return host().unsafeGetGeneratorImpl()->get_state();
}

c10::DeviceType NeuronGenerator::device_type() {
  return kNeuron;
}

NeuronGenerator* NeuronGenerator::clone_impl() const {
  // A clone is a snapshot the user holds: it never follows the random source.
  auto* copy = new NeuronGenerator(device().index(), /*is_default=*/false);
  copy->host_ = host().clone();
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.push_back(at::make_generator<NeuronGenerator>(i, /*is_default=*/true));
    }
  });
  return generators.at(check_device(device));
}

at::Generator host_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  const at::Generator& g = gen.has_value() && gen->defined() ? *gen : default_generator(device);
  if (g.device().type() == c10::DeviceType::CPU) {
    return g;
  }
  TORCH_CHECK(g.device().type() == kNeuron, "A ", g.device(),
      " generator cannot drive a neuron op; use torch.Generator(device='neuron')");
  return static_cast<NeuronGenerator*>(g.unsafeGetGeneratorImpl())->host();
}

ScopedDefaultCPUGenerator::ScopedDefaultCPUGenerator(at::Generator gen)
    : slot_(const_cast<at::Generator&>(at::detail::getDefaultCPUGenerator())), saved_(slot_) {
  slot_ = std::move(gen);
}

ScopedDefaultCPUGenerator::~ScopedDefaultCPUGenerator() {
  slot_ = std::move(saved_);
}

} // namespace neuron
