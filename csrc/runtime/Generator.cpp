#include "runtime/Generator.h"

#include "runtime/Device.h"

#include <ATen/core/GeneratorForPrivateuseone.h>

#include <mutex>
#include <vector>

namespace neuron {

NeuronGenerator::NeuronGenerator(c10::DeviceIndex device)
    : c10::GeneratorImpl(
          c10::Device(kNeuron, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::detail::createCPUGenerator(c10::default_rng_seed_val)) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  host_.set_current_seed(seed);
}

void NeuronGenerator::set_offset(uint64_t offset) {
  host_.set_offset(offset);
}

uint64_t NeuronGenerator::get_offset() const {
  return host_.get_offset();
}

uint64_t NeuronGenerator::current_seed() const {
  return host_.current_seed();
}

uint64_t NeuronGenerator::seed() {
  return host_.seed();
}

void NeuronGenerator::set_state(const c10::TensorImpl& state) {
  host_.unsafeGetGeneratorImpl()->set_state(state);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  return host_.unsafeGetGeneratorImpl()->get_state();
}

c10::DeviceType NeuronGenerator::device_type() {
  return kNeuron;
}

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* copy = new NeuronGenerator(device().index());
  copy->host_ = host_.clone();
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.push_back(at::make_generator<NeuronGenerator>(i));
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
