// torch.ops.neuron's policy ops (see Platform.cpp): where ops run (routing, the library
// fallback tier), the table of exclusions, the 64-bit policy, op counters and the events that
// `torchneuron check` observes.

#include "aten/Counters.h"
#include "aten/Exclusions.h"
#include "aten/Fallback.h"
#include "aten/Policy.h"
#include "aten/Routing.h"
#include "aten/Upcalls.h"

#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

namespace neuron {
namespace {

using Strings = std::vector<std::string>;

std::vector<int64_t> route(Strings cpu_fallback_ops, Strings mask_ops, Strings device_selecting_ops,
    Strings host_composite_ops, Strings fp8_ops, Strings namespaces) {
  fp8_data_ops().insert(fp8_ops.begin(), fp8_ops.end());
  add_native_namespaces(namespaces);
  auto counts = route_ops({std::move(cpu_fallback_ops), std::move(mask_ops),
      std::move(device_selecting_ops), std::move(host_composite_ops)});
  return {counts.native, counts.cpu_fallback, counts.mask_dependent, counts.host_composite};
}

std::tuple<Strings, Strings, Strings, Strings> exclusion_table() {
  Strings ids, features, messages, ways_out;
  for (const auto& row : exclusions()) {
    ids.emplace_back(row.id);
    features.emplace_back(row.feature);
    messages.emplace_back(row.message);
    ways_out.emplace_back(row.way_out);
  }
  return {ids, features, messages, ways_out};
}

std::string policy_64bit_name() {
  switch (policy_64bit()) {
    case Policy64::Narrow:
      return "narrow";
    case Policy64::Native:
      return "native";
    case Policy64::Error:
      return "error";
  }
  return "";
}

std::tuple<Strings, std::vector<int64_t>> counters() {
  Strings names;
  std::vector<int64_t> values;
  for (auto& [name, value] : counter_values()) {
    names.push_back(name);
    values.push_back(value);
  }
  return {names, values};
}

TORCH_LIBRARY_FRAGMENT(neuron, m) {
  m.def(
      "route(str[] cpu_fallback_ops, str[] mask_ops, str[] device_selecting_ops, "
      "str[] host_composite_ops, str[] fp8_ops, str[] native_namespaces) -> int[]",
      &route);
  m.def("add_native_namespaces(str[] namespaces) -> ()",
      [](Strings namespaces) { add_native_namespaces(namespaces); });
  m.def("takes_library_fallback(str op) -> bool",
      [](std::string op) { return takes_library_fallback(op); });
  m.def("route_device_kernels(str[] ops) -> int",
      [](Strings ops) { return route_device_kernels(ops); });
  m.def(
      "exclusions() -> (str[] id, str[] feature, str[] message, str[] way_out)", &exclusion_table);
  m.def("policy_64bit() -> str", &policy_64bit_name);
  m.def("counters() -> (str[], int[])", &counters);
  m.def("clear_counters() -> ()", [] { clear_counters(); });
  m.def("set_observing(bool on) -> ()", &set_observing);
}

} // namespace
} // namespace neuron
