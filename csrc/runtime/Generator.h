#pragma once
// Per-core random generators. Each wraps a CPU generator because the host kernels that
// run on device memory only accept CPU generators; the same seed then gives the CPU's numbers.
//
// The random source (TORCH_NEURONX_RNG, set_rng_source): with "device", each core's default
// generator has its own stream, as on Trainium. With "cpu", the default generators are the CPU's
// default generator: random ops on neuron tensors draw from the stream the same program draws
// from on a CPU-only machine, in program order, so a CPU run and a neuron run see the same
// numbers (`torchneuron parity`). Seeding and state calls on a default generator then act on
// that stream too, which keeps fork_rng, checkpointing's RNG replay and DTensor's RNG tracker
// coherent. Generators made by the user (torch.Generator(device="neuron")) keep their own.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace neuron {

struct NeuronGenerator final : public c10::GeneratorImpl {
  // A default generator follows the random source; one the user made never does.
  NeuronGenerator(c10::DeviceIndex device, bool is_default);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type();

  // The CPU generator that host kernels draw from.
  const at::Generator& host() const;

 private:
  NeuronGenerator* clone_impl() const override;
  at::Generator host_;
  bool is_default_;
};

enum class RngSource { Device, Cpu };
RngSource rng_source();
void set_rng_source(RngSource source);

const at::Generator& default_generator(c10::DeviceIndex device);
// The CPU generator to hand a host kernel for `gen` (a neuron generator, or none for the default).
at::Generator host_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

// While alive, the default CPU generator is `gen`: host kernels that draw from it implicitly
// then draw from (and advance) a neuron core's generator instead.
class ScopedDefaultCPUGenerator {
 public:
  explicit ScopedDefaultCPUGenerator(at::Generator gen);
  ~ScopedDefaultCPUGenerator();
  ScopedDefaultCPUGenerator(const ScopedDefaultCPUGenerator&) = delete;
  ScopedDefaultCPUGenerator& operator=(const ScopedDefaultCPUGenerator&) = delete;

 private:
  at::Generator& slot_;
  at::Generator saved_;
};

} // namespace neuron
