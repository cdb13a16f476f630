#pragma once
// The allocator's memory history in the actions and order of CUDA's caching allocator
// (torch.cuda.memory._snapshot's device_traces), with the stack traces CUDA's `context` levels
// keep. The allocator owns one and calls it with its lock held.

#include <c10/core/Allocator.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace neuron {

// A free is requested and completed at once: execution is synchronous.
enum class HistoryAction : int64_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  Oom
};

// CUDA's `context` levels: which events keep a stack trace.
enum class ContextLevel : int { None, State, Alloc, All };

struct HistoryEntry {
  HistoryAction action;
  c10::DeviceIndex device;
  uintptr_t addr;
  size_t size;
  int64_t time_us;
  size_t device_free; // for Oom
  std::shared_ptr<c10::GatheredContext> context;
};

class MemoryHistory {
 public:
  // Inline, as what follows down to note(): the allocator runs these on every allocation and
  // free, and when nobody records each costs one relaxed load.
  static bool on() { return on_.load(std::memory_order_relaxed); }
  static bool keeps(ContextLevel level) {
    return level_.load(std::memory_order_relaxed) >= static_cast<int>(level);
  }

  // The stack trace an event of `least` keeps: gathered before the allocator takes its lock.
  static std::shared_ptr<c10::GatheredContext> context_if(ContextLevel least) {
    return on() && keeps(least) ? gather() : nullptr;
  }
  // Leaves a stack trace to drop once the allocator's lock is released: dropping one takes the
  // GIL, which a thread waiting for the lock may hold.
  static void drop_later(std::shared_ptr<c10::GatheredContext>&& context) {
    if (context) {
      keep_for_dropping(std::move(context));
    }
  }

  // Drops what drop_later left, when it goes out of scope (declare it before taking the lock).
  struct DropAfterUnlock {
    DropAfterUnlock() = default;
    DropAfterUnlock(const DropAfterUnlock&) = delete;
    DropAfterUnlock& operator=(const DropAfterUnlock&) = delete;
    ~DropAfterUnlock() {
      if (C10_UNLIKELY(used_.load(std::memory_order_relaxed))) {
        drop_kept();
      }
    }
  };

  void note(HistoryAction action, c10::DeviceIndex device, void* addr, size_t size,
      std::shared_ptr<c10::GatheredContext> context, size_t device_free = 0) {
    if (on() && trace_all_) {
      append(action, device, addr, size, std::move(context), device_free);
    }
  }
  // torch.neuron.memory._record_memory_history's settings; turning it off or `clear` empties
  // the ring.
  void configure(
      bool record, bool trace_all, ContextLevel level, bool cpp, size_t max_entries, bool clear);
  // Oldest entry first.
  std::vector<HistoryEntry> entries() const;

 private:
  static std::shared_ptr<c10::GatheredContext> gather();
  static void keep_for_dropping(std::shared_ptr<c10::GatheredContext>&& context);
  static void drop_kept();
  void append(HistoryAction action, c10::DeviceIndex device, void* addr, size_t size,
      std::shared_ptr<c10::GatheredContext> context, size_t device_free);

  static std::atomic<bool> on_;
  // Ever on in this process: only then can stack traces be left to drop.
  static std::atomic<bool> used_;
  static std::atomic<int> level_;
  static std::atomic<bool> cpp_;

  // A ring of at most max_entries_, oldest at next_.
  std::vector<HistoryEntry> ring_;
  size_t next_ = 0;
  size_t max_entries_ = 0;
  bool trace_all_ = false;
};

} // namespace neuron
