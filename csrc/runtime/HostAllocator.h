#pragma once
// Pinned host memory. On the emulated device every host page is equally reachable, so
// "pinned" only means "owned by this allocator", which is what is_pinned() reports.

#include <ATen/core/CachingHostAllocator.h>

namespace neuron {

class HostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dst, const void* src, size_t nbytes) const override;
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  void empty_cache() override;
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;

  bool is_pinned(const void* ptr);
};

HostAllocator* host_allocator();

} // namespace neuron
