#pragma once
// The environment variables the C++ side reads, with their defaults: the C++ part of the one
// configuration table (torch_neuronx/_config.py holds every variable; a test keeps them equal).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron::config {

struct Variable {
  const char* name;
  const char* fallback; // the default, as text; "" means unset
};

constexpr Variable kLogicalCoreConfig{"NEURON_LOGICAL_NC_CONFIG", "2"};
// The runtime's name for the same setting (Neuron Explorer's profiling launch uses it).
constexpr Variable kVirtualCoreSize{"NEURON_RT_VIRTUAL_CORE_SIZE", ""};
constexpr Variable kVisibleCores{"NEURON_RT_VISIBLE_CORES", ""};
constexpr Variable kNumCores{"NEURON_RT_NUM_CORES", ""};
constexpr Variable kFallbackEnabled{"NEURON_FALLBACK_ENABLED", "1"};
constexpr Variable kPolicy64Bit{"TORCH_NEURONX_64BIT", "narrow"};
constexpr Variable kConcatenation{"TORCH_NEURONX_ENABLE_CONCATENATION", "0"};
constexpr Variable kPrologue{"TORCH_NEURONX_ENABLE_PROLOGUE", "1"};
constexpr Variable kQueueLimit{"TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", "64"};
constexpr Variable kRngSource{"TORCH_NEURONX_RNG", "device"};

// Every variable above as (name, default).
std::vector<std::pair<std::string, std::string>> variables();

// The logical NeuronCore size: NEURON_LOGICAL_NC_CONFIG or NEURON_RT_VIRTUAL_CORE_SIZE (two
// different values raise, naming both).
int64_t logical_core_size();
// The variable that logical_core_size() takes its value from.
const Variable& logical_core_variable();
// The variable's value, or its default when unset or empty.
std::string text(const Variable& v);
// A boolean: 1/0, true/false, yes/no, on/off in any case; anything else raises, naming it.
bool flag(const Variable& v);
// An integer; anything else raises, naming the variable.
int64_t integer(const Variable& v);
// The integer in `text`, as the value of `name`; anything else raises, naming the variable.
int64_t parse_integer(const std::string& text, const char* name);

} // namespace neuron::config
