#pragma once
// Points at which work the op layer has queued (aten/OpQueue.h) must have run, because something
// is about to observe device memory or the order of device work. The runtime reaches its own
// (synchronize, streams, events, memory statistics); the op layer reaches the rest.

#include <atomic>

namespace neuron {

enum class Boundary : int {
  Read, // a value goes to the host: .item(), .cpu(), printing, .tolist()
  Synchronize,
  Stream, // the current stream changes
  Event,
  MemoryStats,
  CompiledGraph,
  Collective,
  HostAccess, // NKI kernels and other code given the host view of device memory
  Size,       // the queue is full
  Op,         // an op that cannot join the queue
  Shape,      // an op on tensors of another size, device or dtype than the queued ones
  Alias,      // an op on a view overlapping a queued tensor differently
  Count_,
};

const char* boundary_name(Boundary b);

extern std::atomic<bool> g_queued;

// Runs the queued work; when nothing is queued this is one relaxed load.
void run_queued_work(Boundary b);
inline void reach(Boundary b) {
  if (g_queued.load(std::memory_order_relaxed)) {
    run_queued_work(b);
  }
}
// Installed once by the op layer.
void set_queued_work_runner(void (*runner)(Boundary));

// Gives back the device memory of queued results the program has dropped, which eager would
// have freed by now, so that peaks are eager's; the allocator calls it before it allocates.
// When nothing is queued this is one relaxed load.
void release_dropped_work();
inline void before_allocation() {
  if (g_queued.load(std::memory_order_relaxed)) {
    release_dropped_work();
  }
}
// Installed once by the op layer.
void set_dropped_work_releaser(void (*releaser)());

} // namespace neuron
