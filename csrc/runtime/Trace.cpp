#include "runtime/Trace.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "runtime/Device.h"

namespace neuron::trace {

std::atomic<int32_t> g_collecting{0};
std::atomic<int32_t> g_profiling{0};

namespace {

std::mutex g_mutex;
std::vector<Event> g_events;
// Each profile's correlation ids carry its number: ops a thread entered during an earlier
// profile and left after it ended leave their ids behind, which must link nothing later.
std::atomic<uint64_t> g_profile{0};
thread_local std::vector<std::pair<uint64_t, uint64_t>> tls_correlations;

// Spans opened through the C interface, by token.
std::mutex g_open_mutex;
std::unordered_map<uint64_t, std::unique_ptr<Span>> g_open;
uint64_t g_next_token = 1;

uint64_t api_begin(const char* name, int32_t kind, int32_t device, int64_t stream,
    const char* category, int64_t bytes) {
  if (!collecting()) {
    return 0;
  }
  auto span = std::make_unique<Span>();
  span->begin(static_cast<Kind>(kind), device, category, name);
  if (stream >= 0) {
    span->set_stream(stream);
  }
  span->add_bytes(bytes);
  std::lock_guard<std::mutex> lock(g_open_mutex);
  uint64_t token = g_next_token++;
  g_open.emplace(token, std::move(span));
  return token;
}

void api_end(uint64_t token) {
  std::unique_ptr<Span> span;
  {
    std::lock_guard<std::mutex> lock(g_open_mutex);
    auto it = g_open.find(token);
    if (it == g_open.end()) {
      return;
    }
    span = std::move(it->second);
    g_open.erase(it);
  }
  span->finish();
}

const Api g_api{&g_collecting, &api_begin, &api_end};

} // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t current_correlation() {
  if (tls_correlations.empty()) {
    return 0;
  }
  const auto& [profile, id] = tls_correlations.back();
  return profile == g_profile.load(std::memory_order_relaxed) ? id : 0;
}

void push_correlation(uint64_t id) {
  tls_correlations.emplace_back(g_profile.load(std::memory_order_relaxed), id);
}

void pop_correlation() {
  if (!tls_correlations.empty()) {
    tls_correlations.pop_back();
  }
}

int64_t current_stream(int32_t device) {
  if (device < 0 || device >= device_count()) {
    return 0;
  }
  return c10::impl::getDeviceGuardImpl(kNeuron)
      ->getStream(c10::Device(kNeuron, static_cast<c10::DeviceIndex>(device)))
      .id();
}

void record(Event&& event) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (collecting()) {
    g_events.push_back(std::move(event));
  }
}

void start(bool device_rows) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.clear();
  g_profile.fetch_add(1);
  g_profiling.store(1, std::memory_order_relaxed);
  g_collecting.store(device_rows ? 1 : 0, std::memory_order_relaxed);
}

std::vector<Event> stop() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_collecting.store(0, std::memory_order_relaxed);
  g_profiling.store(0, std::memory_order_relaxed);
  return std::move(g_events);
}

void Span::begin(Kind kind, int32_t device, const char* category, std::string name) {
  event_ = std::make_unique<Event>(
      Event{std::move(name), kind, device, 0, 0, 0, current_correlation(), 0, category});
  if (device >= 0) {
    event_->stream = current_stream(device);
  }
  event_->start_ns = now_ns();
}

void Span::set_device(int32_t device) {
  if (event_) {
    event_->device = device;
    event_->stream = current_stream(device);
  }
}

void Span::set_stream(int64_t stream) {
  if (event_) {
    event_->stream = stream;
  }
}

void Span::add_bytes(int64_t bytes) {
  if (event_) {
    event_->bytes += bytes;
  }
}

void Span::finish() {
  if (!event_) {
    return;
  }
  event_->end_ns = now_ns();
  // A kernel too short for the clock still ran: it spans at least 1 ns.
  if (event_->end_ns <= event_->start_ns) {
    event_->end_ns = event_->start_ns + 1;
  }
  record(std::move(*event_));
  event_.reset();
}

const Api* api() {
  return &g_api;
}

} // namespace neuron::trace
