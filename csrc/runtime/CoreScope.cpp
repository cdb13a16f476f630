#include "runtime/CoreScope.h"

#include "runtime/Device.h"

#include <array>
#include <atomic>
#include <chrono>

namespace neuron {
namespace {

constexpr size_t kMaxCores = 256;
std::atomic<bool> counting{false};
std::array<std::atomic<int64_t>, kMaxCores> busy{};
// Nested scopes (a composite's ops, a graph's fallback ops) belong to the outermost one.
thread_local int depth = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

CoreScope::CoreScope(c10::DeviceIndex device, bool pool, bool rng) : device_(device) {
  if (depth++ == 0 && counting.load(std::memory_order_relaxed) &&
      static_cast<size_t>(device) < kMaxCores) {
    busy_since_ns_ = now_ns();
  }
  if (pool) {
    pool_.emplace(device);
  }
  if (rng) {
    rng_.emplace(host_generator(std::nullopt, device));
  }
}

CoreScope::~CoreScope() {
  --depth;
  if (busy_since_ns_ >= 0) {
    busy[device_].fetch_add(now_ns() - busy_since_ns_, std::memory_order_relaxed);
  }
}

int64_t busy_ns(c10::DeviceIndex device) {
  auto index = check_device(device);
  counting.store(true, std::memory_order_relaxed);
  TORCH_CHECK(static_cast<size_t>(index) < kMaxCores, "busy time is counted for the first ",
      kMaxCores, " cores only; neuron:", index, " is beyond them");
  return busy[index].load(std::memory_order_relaxed);
}

} // namespace neuron
