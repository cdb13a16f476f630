#pragma once
// The emulated Neuron platform: which logical NeuronCores exist and how much HBM each has.

#include <c10/core/Device.h>

#include <cstddef>
#include <string>

namespace neuron {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// The platform that torch_neuronx/_platforms.py chose, before any device is used; a non-empty
// `error` is raised when the device is first used instead.
void configure_platform(
    std::string name, size_t hbm_per_chip, int64_t physical_cores, std::string error);
// Number of visible logical NeuronCores (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES).
c10::DeviceIndex device_count() noexcept;
// "trn2" or "trn3" (NEURON_PLATFORM_TARGET_OVERRIDE).
const std::string& platform_name();
// HBM bytes of one logical core.
size_t hbm_capacity();
// Physical index of visible core `index` on the emulated chip.
int64_t physical_core(c10::DeviceIndex index);

c10::DeviceIndex current_device() noexcept;
void set_current_device(c10::DeviceIndex index);
// Maps -1 to the current device and rejects out-of-range indices.
c10::DeviceIndex check_device(c10::DeviceIndex index);

} // namespace neuron
