#pragma once
// Device-side activity of the emulated NeuronCores, for torch.profiler (ProfilerActivity
// .PrivateUse1). "Device time" is the host time the runtime spends executing an op's kernel on
// device memory. Nothing is recorded unless a profiler session is collecting: every hook first
// tests one relaxed atomic flag.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace neuron::trace {

enum class Kind : int32_t { Kernel = 0, Memcpy = 1 };

struct Event {
  std::string name;
  Kind kind;
  int32_t device;
  int64_t stream;
  int64_t start_ns;
  int64_t end_ns;
  // Correlation id of the innermost profiled CPU op that launched this activity (0: none).
  uint64_t correlation;
  int64_t bytes;
  // What ran: "eager", "cpu_fallback", "compiled_graph", "collective", "nki", "HtoD", ...
  std::string category;
};

// Stream id of the collectives' row: c10d work runs beside the compute streams, as NCCL's
// stream does.
constexpr int64_t kCollectiveStream = 1 << 20;

extern std::atomic<int32_t> g_collecting;
extern std::atomic<int32_t> g_profiling;

// A profile is recording neuron device activity.
inline bool collecting() {
  return g_collecting.load(std::memory_order_relaxed) != 0;
}

// A profile of any activities is running (the allocator then reports to profile_memory).
inline bool profiling() {
  return g_profiling.load(std::memory_order_relaxed) != 0;
}

// Unix time in ns, the clock Kineto stamps its CPU events with.
int64_t now_ns();
// The innermost profiled CPU op on this thread (Kineto pushes and pops them), or 0.
uint64_t current_correlation();
void push_correlation(uint64_t id);
void pop_correlation();
// The current stream's id on `device`.
int64_t current_stream(int32_t device);
void record(Event&& event);
// Starts a profile, collecting device activity with `device_rows`; `stop` ends it and hands
// over what was recorded.
void start(bool device_rows);
std::vector<Event> stop();

// One device activity, from begin() to finish() (or destruction); holds nothing and costs one
// flag test when no profiler collects.
class Span {
 public:
  Span() = default;
  // Begins when a profiler collects; `name` is only called then.
  template <typename NameFn>
  Span(Kind kind, int32_t device, const char* category, NameFn&& name) {
    if (collecting()) {
      begin(kind, device, category, name());
    }
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span() {
    if (event_) {
      finish();
    }
  }

  bool active() const { return event_ != nullptr; }
  // Also picks the device's current stream (device -1: not known yet).
  void begin(Kind kind, int32_t device, const char* category, std::string name);
  void set_device(int32_t device);
  void set_stream(int64_t stream);
  void add_bytes(int64_t bytes);
  void finish();
  // Drops the activity unrecorded (it moved no data, say).
  void discard() { event_.reset(); }

 private:
  std::unique_ptr<Event> event_;
};

// The C interface that the Python layer (ctypes) and the c10d module reach through the
// neuron::trace_api op: the flag, and begin/end of a span identified by a token.
struct Api {
  const std::atomic<int32_t>* collecting;
  uint64_t (*begin)(const char* name, int32_t kind, int32_t device, int64_t stream,
      const char* category, int64_t bytes);
  void (*end)(uint64_t token);
};

const Api* api();

} // namespace neuron::trace
