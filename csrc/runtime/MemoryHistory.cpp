#include "runtime/MemoryHistory.h"

#include "runtime/MemoryContext.h"

#include <chrono>
#include <utility>

namespace neuron {
namespace {

thread_local std::vector<std::shared_ptr<c10::GatheredContext>> tls_dropped;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

std::atomic<bool> MemoryHistory::on_{false};
std::atomic<bool> MemoryHistory::used_{false};
std::atomic<int> MemoryHistory::level_{0};
std::atomic<bool> MemoryHistory::cpp_{false};

std::shared_ptr<c10::GatheredContext> MemoryHistory::gather() {
  return memory_context::gather(cpp_.load(std::memory_order_relaxed));
}

void MemoryHistory::keep_for_dropping(std::shared_ptr<c10::GatheredContext>&& context) {
  tls_dropped.push_back(std::move(context));
}

void MemoryHistory::drop_kept() {
  tls_dropped.clear();
}

void MemoryHistory::append(HistoryAction action, c10::DeviceIndex device, void* addr, size_t size,
    std::shared_ptr<c10::GatheredContext> context, size_t device_free) {
  HistoryEntry e{action, device, reinterpret_cast<uintptr_t>(addr), size, now_us(), device_free,
      std::move(context)};
  if (ring_.size() < max_entries_) {
    ring_.push_back(std::move(e));
    return;
  }
  if (ring_.empty()) {
    return;
  }
  drop_later(std::move(ring_[next_].context));
  ring_[next_] = std::move(e);
  next_ = (next_ + 1) % ring_.size();
}

void MemoryHistory::configure(
    bool record, bool trace_all, ContextLevel level, bool cpp, size_t max_entries, bool clear) {
  if (clear || !record) {
    for (auto& e : ring_) {
      drop_later(std::move(e.context));
    }
    ring_.clear();
    next_ = 0;
  }
  trace_all_ = trace_all;
  max_entries_ = max_entries;
  level_.store(static_cast<int>(level));
  cpp_.store(cpp);
  used_.store(used_.load() || record);
  on_.store(record);
}

std::vector<HistoryEntry> MemoryHistory::entries() const {
  std::vector<HistoryEntry> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    out.push_back(ring_[(next_ + i) % ring_.size()]);
  }
  return out;
}

} // namespace neuron
