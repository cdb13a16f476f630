#pragma once
// Per-core random generators. Each wraps a CPU generator because the host kernels that
// run on device memory only accept CPU generators; the same seed then gives the CPU's numbers.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace neuron {

struct NeuronGenerator final : public c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex device);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type();

  // The CPU generator that host kernels draw from.
  const at::Generator& host() const { return host_; }

 private:
  NeuronGenerator* clone_impl() const override;
  at::Generator host_;
};

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
