#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron {

struct RouteCounts {
  int64_t native = 0;
  int64_t cpu_fallback = 0;
  int64_t mask_dependent = 0;
};

// Registers the host-kernel path for ops that need it by name; runs once per process.
// `cpu_fallback_ops` always take the CPU-fallback tier; `mask_ops` take it when indexed with a
// boolean mask (their result shape then depends on the data) and run natively otherwise.
RouteCounts route_ops(const std::vector<std::string>& cpu_fallback_ops,
    const std::vector<std::string>& mask_ops);

} // namespace neuron
