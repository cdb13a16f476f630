#include "runtime/Boundary.h"

namespace neuron {

std::atomic<bool> g_queued{false};

namespace {
void (*g_runner)(Boundary) = nullptr;
void (*g_releaser)() = nullptr;
} // namespace

const char* boundary_name(Boundary b) {
  static constexpr const char* names[] = {"read", "synchronize", "stream", "event", "memory_stats",
      "compiled_graph", "collective", "host_access", "size", "op", "shape", "alias"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(Boundary::Count_));
  return names[static_cast<int>(b)];
}

void run_queued_work(Boundary b) {
  if (g_runner) {
    g_runner(b);
  }
}

void set_queued_work_runner(void (*runner)(Boundary)) {
  g_runner = runner;
}

void release_dropped_work() {
  if (g_releaser) {
    g_releaser();
  }
}

void set_dropped_work_releaser(void (*releaser)()) {
  g_releaser = releaser;
}

} // namespace neuron
