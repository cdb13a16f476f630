#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron {

struct RouteCounts {
  int64_t native = 0;
  int64_t cpu_fallback = 0;
};

// Registers the host-kernel path for ops that need it by name; runs once per process.
RouteCounts route_ops(const std::vector<std::string>& cpu_fallback_ops);

} // namespace neuron
