#include "aten/Counters.h"

#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace neuron {
namespace {

const char* const kCounterNames[] = {
    "HostToDeviceCopies",
    "HostToDeviceBytes",
    "DeviceToHostCopies",
    "DeviceToHostBytes",
    "DeviceToDeviceCopies",
    "DeviceToDeviceBytes",
    "Narrowed64BitValues",
    "QueuedOps",
    "FusedKernels",
    "FusedOps",
    "FusionCacheHits",
    "FusionCacheMisses",
    "RunAlone",
};
static_assert(
    sizeof(kCounterNames) / sizeof(kCounterNames[0]) == static_cast<size_t>(Counter::Count_));

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, std::unique_ptr<OpCounts>> ops;
  std::array<std::atomic<int64_t>, static_cast<size_t>(Counter::Count_)> counters{};
  std::array<std::atomic<int64_t>, static_cast<size_t>(Boundary::Count_)> queue_runs{};
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

} // namespace

OpCounts* op_counts(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& slot = r.ops[name];
  if (!slot) {
    slot = std::make_unique<OpCounts>();
    slot->name = name;
  }
  return slot.get();
}

void count(Counter counter, int64_t n) {
  registry().counters[static_cast<size_t>(counter)].fetch_add(n, std::memory_order_relaxed);
}

void count_queue_run(Boundary reason) {
  registry().queue_runs[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::pair<std::string, int64_t>> counter_values() {
  auto& r = registry();
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < r.counters.size(); ++i) {
    if (auto v = r.counters[i].load()) {
      out.emplace_back(kCounterNames[i], v);
    }
  }
  for (size_t i = 0; i < r.queue_runs.size(); ++i) {
    if (auto v = r.queue_runs[i].load()) {
      out.emplace_back(std::string("QueueRun::") + boundary_name(static_cast<Boundary>(i)), v);
    }
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [name, counts] : r.ops) {
    if (auto v = counts->native.load()) {
      out.emplace_back("NativeOp::" + name, v);
    }
    if (auto v = counts->fallback.load()) {
      out.emplace_back("FallbackOp::" + name, v);
    }
    if (auto v = counts->compiled_fallback.load()) {
      out.emplace_back("CompiledFallbackOp::" + name, v);
    }
  }
  return out;
}

void clear_counters() {
  auto& r = registry();
  for (auto& c : r.counters) {
    c.store(0);
  }
  for (auto& c : r.queue_runs) {
    c.store(0);
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& [name, counts] : r.ops) {
    counts->native.store(0);
    counts->fallback.store(0);
    counts->compiled_fallback.store(0);
  }
}

} // namespace neuron
