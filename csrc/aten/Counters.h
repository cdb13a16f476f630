#pragma once
// Event counters behind torch_neuronx.metrics. Updating one is an atomic add, so counting
// stays on for every op.

#include "runtime/Boundary.h"

#include <ATen/core/operator_name.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron {

struct OpCounts {
  std::string name;
  std::atomic<int64_t> native{0};
  std::atomic<int64_t> fallback{0};
  // The fallback calls made by compiled graphs (counted in `fallback` too).
  std::atomic<int64_t> compiled_fallback{0};
  std::atomic<bool> warned{false};
};

enum class Counter : int {
  HostToDeviceCopies,
  HostToDeviceBytes,
  DeviceToHostCopies,
  DeviceToHostBytes,
  DeviceToDeviceCopies,
  DeviceToDeviceBytes,
  Narrowed64Bit,
  QueuedOps,
  FusedKernels,
  FusedOps,
  FusionCacheHits,
  FusionCacheMisses,
  RunAlone,
  Count_,
};

// The counts of one op; the record lives for the whole process.
OpCounts* op_counts(const std::string& name);
void count(Counter counter, int64_t n = 1);
// One run of the op queue (aten/OpQueue.h), by the boundary that caused it.
void count_queue_run(Boundary reason);
// Every non-zero counter as (name, value); op counters are "NativeOp::<op>", "FallbackOp::<op>"
// and "CompiledFallbackOp::<op>", queue runs "QueueRun::<boundary>".
std::vector<std::pair<std::string, int64_t>> counter_values();
void clear_counters();

} // namespace neuron
