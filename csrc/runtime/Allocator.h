#pragma once
// Caching allocator for emulated HBM: host memory, per-core capacity, CUDA-style statistics.

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

#include <memory>
#include <vector>

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

// torch.neuron.memory._record_memory_history. `context_level` is CUDA's context argument as
// 0 None, 1 "state", 2 "alloc", 3 "all"; `cpp` adds C++ frames to the stack traces.
void record_memory_history(
    bool on, bool trace_all, int context_level, bool cpp, size_t max_entries, bool clear);

// The allocator's state and history, flattened for torch.neuron.memory._snapshot.
struct MemorySnapshot {
  static constexpr int kSegmentFields = 6; // device, address, size, requested, active, context
  static constexpr int kEntryFields = 7;   // device, action, addr, size, time_us, free, context
  std::vector<int64_t> segments;
  std::vector<int64_t> entries;
  // The stack traces that `context` fields index (-1: none).
  std::vector<std::shared_ptr<c10::GatheredContext>> contexts;
};

MemorySnapshot memory_snapshot();

// torch.neuron.set_per_process_memory_fraction: this process may reserve at most
// `fraction` of the core's HBM.
void set_memory_fraction(c10::DeviceIndex device, double fraction);

// torch.neuron.caching_allocator_alloc/delete: raw device memory, identified by its address.
void* raw_alloc(size_t nbytes, c10::DeviceIndex device);
// False, freeing nothing, when `ptr` is not a block's address.
bool raw_free(void* ptr);

// torch.neuron.caching_allocator_enable: with caching off, freed blocks go back to the host at
// once (as PYTORCH_NO_CUDA_MEMORY_CACHING does on CUDA).
void set_caching(bool enabled);
bool caching();

// The device whose pool a CPU storage's memory came from (in a DevicePoolScope), or -1.
c10::DeviceIndex pool_device_of(const c10::StorageImpl* storage);

// Turns a CPU storage whose memory came from a device pool into device memory, in place.
// Returns false, changing nothing, for any other storage.
bool claim_for_device(c10::StorageImpl* storage);

} // namespace neuron
