#pragma once
// Caching allocator for emulated HBM: host memory, per-core capacity, CUDA-style statistics.

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

namespace neuron {

class DeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dst, const void* src, size_t nbytes) const override;
  bool initialized() override;
  void emptyCache(c10::MempoolId_t pool = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Allocates on `device` rather than the current device.
  c10::DataPtr allocate_on(size_t nbytes, c10::DeviceIndex device);
  // Takes ownership of host memory produced by a CPU kernel, with no copy, as memory of `device`.
  c10::DataPtr adopt(c10::DataPtr&& host, size_t nbytes, c10::DeviceIndex device);
  // The device whose memory holds `ptr`, or -1.
  c10::DeviceIndex device_of(const void* ptr);
};

DeviceAllocator* device_allocator();

// While alive, CPU allocations made on this thread come from `device`'s pool, so that host
// kernels running a neuron op write their results straight into device memory.
class DevicePoolScope {
 public:
  explicit DevicePoolScope(c10::DeviceIndex device);
  ~DevicePoolScope();
  DevicePoolScope(const DevicePoolScope&) = delete;
  DevicePoolScope& operator=(const DevicePoolScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// The device whose pool a CPU storage's memory came from (in a DevicePoolScope), or -1.
c10::DeviceIndex pool_device_of(const c10::StorageImpl* storage);

// Turns a CPU storage whose memory came from a device pool into device memory, in place.
// Returns false, changing nothing, for any other storage.
bool claim_for_device(c10::StorageImpl* storage);

} // namespace neuron
