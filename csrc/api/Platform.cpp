// torch.ops.neuron, the core library's API to Python (it has no pybind): one file per owner,
// each adding its ops to the namespace that this file defines. Here the platform and its cores,
// the configuration table and the trace channel.

#include "runtime/Config.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/Trace.h"

#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

namespace neuron {
namespace {

// Raises the platform's configuration error, where device_count() alone would report 0 cores.
int64_t count() {
  platform_name();
  return device_count();
}

std::tuple<std::string, int64_t, int64_t> platform(int64_t device) {
  auto index = check_device(static_cast<c10::DeviceIndex>(device));
  return {platform_name(), static_cast<int64_t>(hbm_capacity()), physical_core(index)};
}

void set_platform(
    std::string name, int64_t hbm_per_chip, int64_t physical_cores, std::string error) {
  configure_platform(
      std::move(name), static_cast<size_t>(hbm_per_chip), physical_cores, std::move(error));
}

std::tuple<std::vector<std::string>, std::vector<std::string>> config_variables() {
  std::vector<std::string> names;
  std::vector<std::string> defaults;
  for (auto& [name, fallback] : config::variables()) {
    names.push_back(name);
    defaults.push_back(fallback);
  }
  return {names, defaults};
}

// The address of the trace::Api (see runtime/Trace.h), for ctypes and the c10d module.
int64_t trace_api() {
  return reinterpret_cast<int64_t>(trace::api());
}

TORCH_LIBRARY(neuron, m) {
  m.def("device_count() -> int", &count);
  m.def("platform(int device) -> (str, int, int)", &platform);
  m.def("set_platform(str name, int hbm_per_chip, int physical_cores, str error) -> ()",
      &set_platform);
  m.def("config_variables() -> (str[], str[])", &config_variables);
  m.def("busy_ns(int device) -> int",
      [](int64_t device) { return busy_ns(static_cast<c10::DeviceIndex>(device)); });
  m.def("trace_api() -> int", &trace_api);
}

} // namespace
} // namespace neuron
