// torch.ops.neuron's memory ops (see Platform.cpp): what torch.neuron's memory functions call
// (neuron/memory.py).

#include "runtime/Allocator.h"
#include "runtime/HostAllocator.h"
#include "runtime/MemoryContext.h"

#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

namespace neuron {
namespace {

void record_memory_history(
    bool on, bool trace_all, int64_t context_level, bool cpp, int64_t max_entries, bool clear) {
  TORCH_CHECK(max_entries >= 0, "max_entries must be >= 0, got ", max_entries);
  neuron::record_memory_history(
      on, trace_all, static_cast<int>(context_level), cpp, static_cast<size_t>(max_entries), clear);
}

// The allocator's snapshot, flattened (see MemorySnapshot), with the stack traces symbolized:
// context i holds frames indices[offsets[i] : offsets[i + 1]] of the frame table.
std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
    std::vector<std::string>, std::vector<std::string>, std::vector<int64_t>>
memory_snapshot() {
  auto snap = neuron::memory_snapshot();
  std::vector<c10::GatheredContext*> contexts;
  for (auto& c : snap.contexts) {
    contexts.push_back(c.get());
  }
  auto frames = memory_context::symbolize(contexts);
  return {std::move(snap.segments), std::move(snap.entries), std::move(frames.offsets),
      std::move(frames.indices), std::move(frames.filenames), std::move(frames.names),
      std::move(frames.lines)};
}

void set_memory_fraction(int64_t device, double fraction) {
  neuron::set_memory_fraction(static_cast<c10::DeviceIndex>(device), fraction);
}

int64_t raw_alloc(int64_t nbytes, int64_t device) {
  TORCH_CHECK(nbytes >= 0, "caching_allocator_alloc: size must be >= 0, got ", nbytes);
  return reinterpret_cast<int64_t>(
      neuron::raw_alloc(static_cast<size_t>(nbytes), static_cast<c10::DeviceIndex>(device)));
}

void raw_delete(int64_t ptr) {
  TORCH_CHECK(neuron::raw_free(reinterpret_cast<void*>(ptr)), "caching_allocator_delete: ", ptr,
      " is not an address that caching_allocator_alloc returned (or it was already deleted)");
}

// Pinned host memory statistics, with the keys torch.cuda.host_memory_stats uses.
std::tuple<std::vector<std::string>, std::vector<int64_t>> host_memory_stats() {
  auto stats = host_allocator()->get_stats();
  std::vector<std::string> names;
  std::vector<int64_t> values;
  for (const auto& [name, stat] : {std::pair{"active_requests", stats.active_requests},
           std::pair{"active_bytes", stats.active_bytes},
           std::pair{"allocations", stats.allocations},
           std::pair{"allocated_bytes", stats.allocated_bytes}}) {
    for (const auto& [field, value] :
        {std::pair{"current", stat.current}, std::pair{"peak", stat.peak},
            std::pair{"allocated", stat.allocated}, std::pair{"freed", stat.freed}}) {
      names.push_back(std::string(name) + "." + field);
      values.push_back(value);
    }
  }
  names.emplace_back("num_host_alloc");
  values.push_back(stats.num_host_alloc);
  names.emplace_back("num_host_free");
  values.push_back(stats.num_host_free);
  return {names, values};
}

void reset_host_memory_stats(bool peak) {
  if (peak) {
    host_allocator()->reset_peak_stats();
  } else {
    host_allocator()->reset_accumulated_stats();
  }
}

TORCH_LIBRARY_FRAGMENT(neuron, m) {
  m.def(
      "record_memory_history(bool on, bool trace_all, int context_level, bool cpp, "
      "int max_entries, bool clear) -> ()",
      &record_memory_history);
  m.def(
      "memory_snapshot() -> (int[] segments, int[] entries, int[] offsets, int[] indices, "
      "str[] filenames, str[] names, int[] lines)",
      &memory_snapshot);
  m.def("set_memory_fraction(int device, float fraction) -> ()", &set_memory_fraction);
  m.def("raw_alloc(int nbytes, int device) -> int", &raw_alloc);
  m.def("raw_delete(int ptr) -> ()", &raw_delete);
  m.def("set_caching(bool enabled) -> ()", &neuron::set_caching);
  m.def("caching() -> bool", &neuron::caching);
  m.def("host_memory_stats() -> (str[], int[])", &host_memory_stats);
  m.def("reset_host_memory_stats(bool peak) -> ()", &reset_host_memory_stats);
}

} // namespace
} // namespace neuron
