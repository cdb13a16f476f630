#include "runtime/Allocator.h"

#include "runtime/Boundary.h"
#include "runtime/Device.h"
#include "runtime/MemoryHistory.h"
#include "runtime/Trace.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace neuron {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kSmallLimit = size_t(1) << 20;  // small pool: requests under 1 MiB
constexpr size_t kClassLimit = size_t(16) << 20; // size classes below 16 MiB
constexpr size_t kMinBlock = 256;
constexpr size_t kAlignment = 64;

// Size classes, as TorchNeuron's memory-management guide states: requests under 16 MiB round up
// (256 B steps below 1 MiB keep small tensors tight; quarter powers of two up to 16 MiB bound
// waste at 25%); requests of 16 MiB and more are not rounded.
size_t round_size(size_t n) {
  if (n < kMinBlock) {
    return kMinBlock;
  }
  if (n < kSmallLimit) {
    return (n + kMinBlock - 1) / kMinBlock * kMinBlock;
  }
  if (n < kClassLimit) {
    size_t quarter = c10::llvm::PowerOf2Floor(n) / 4;
    return (n + quarter - 1) / quarter * quarter;
  }
  return n;
}

struct Block {
  void* ptr;
  size_t size;      // rounded size, what the block reserves
  size_t requested; // what the current owner asked for
  c10::DeviceIndex device;
  bool adopted;
  c10::DataPtr host; // owner of adopted memory
  bool active = false;
  // Where the current owner allocated it (memory history with a context).
  std::shared_ptr<c10::GatheredContext> context;
};

StatType pool_of(size_t size) {
  return size < kSmallLimit ? StatType::SMALL_POOL : StatType::LARGE_POOL;
}

void update(c10::CachingAllocator::StatArray& stat, StatType pool, int64_t delta) {
  for (auto t : {StatType::AGGREGATE, pool}) {
    auto& s = stat[static_cast<size_t>(t)];
    if (delta >= 0) {
      s.increase(static_cast<size_t>(delta));
    } else {
      s.decrease(static_cast<size_t>(-delta));
    }
  }
}

template <typename Fn>
void for_each_stat(DeviceStats& stats, Fn fn) {
  for (auto* arr : {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
           &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
           &stats.inactive_split_bytes, &stats.requested_bytes}) {
    for (auto& s : *arr) {
      fn(s);
    }
  }
}

struct DeviceState {
  DeviceStats stats;
  size_t reserved = 0;
  // torch.neuron.set_per_process_memory_fraction: the share of HBM this process may reserve.
  double fraction = 1.0;
  std::unordered_map<size_t, std::vector<Block*>> free_blocks;
  std::map<uintptr_t, Block*> segments; // every reserved block, for pointer lookups
};

void release_block(void* ptr);

class Pools {
 public:
  Pools() : devices_(device_count()) {
    for (auto& d : devices_) {
      d = std::make_unique<DeviceState>();
    }
  }

  DeviceState& at(c10::DeviceIndex index) { return *devices_.at(check_device(index)); }

  c10::DataPtr allocate(size_t nbytes, c10::DeviceIndex index) {
    before_allocation();
    auto& d = at(index);
    size_t size = round_size(nbytes);
    auto pool = pool_of(size);
    auto context = MemoryHistory::context_if(ContextLevel::State);
    MemoryHistory::DropAfterUnlock drop;
    std::lock_guard<std::mutex> lock(mutex_);
    Block* block = take_cached(d, size);
    if (!block) {
      block = reserve(d, index, size, nbytes, false);
    }
    block->requested = nbytes;
    count_allocation(d, pool, size, nbytes);
    activate(d, block, std::move(context));
    return {block->ptr, block->ptr, &release_block, c10::Device(kNeuron, index)};
  }

  c10::DataPtr adopt(c10::DataPtr&& host, size_t nbytes, c10::DeviceIndex index) {
    auto& d = at(index);
    auto pool = pool_of(nbytes);
    auto context = MemoryHistory::context_if(ContextLevel::State);
    MemoryHistory::DropAfterUnlock drop;
    std::lock_guard<std::mutex> lock(mutex_);
    if (d.reserved + nbytes > capacity(d)) {
      ++d.stats.num_alloc_retries;
      release_cached(d);
      if (d.reserved + nbytes > capacity(d)) {
        fail(d, index, nbytes);
      }
    }
    auto* block = new Block{host.get(), nbytes, nbytes, index, true, std::move(host)};
    d.reserved += nbytes;
    d.segments.emplace(reinterpret_cast<uintptr_t>(block->ptr), block);
    register_block(block);
    update(d.stats.segment, pool, 1);
    update(d.stats.reserved_bytes, pool, nbytes);
    history_.note(HistoryAction::SegmentAlloc, index, block->ptr, nbytes, nullptr);
    count_allocation(d, pool, nbytes, nbytes);
    activate(d, block, std::move(context));
    return {block->ptr, block->ptr, &release_block, c10::Device(kNeuron, index)};
  }

  static void count_allocation(DeviceState& d, StatType pool, size_t size, size_t requested) {
    update(d.stats.allocation, pool, 1);
    update(d.stats.active, pool, 1);
    update(d.stats.allocated_bytes, pool, static_cast<int64_t>(size));
    update(d.stats.active_bytes, pool, static_cast<int64_t>(size));
    update(d.stats.requested_bytes, pool, static_cast<int64_t>(requested));
  }

  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }

  // The device of the block whose base address is `ptr`, or -1.
  c10::DeviceIndex owner(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = registry_.find(ptr);
    return it == registry_.end() ? -1 : it->second->device;
  }

  // Returns the block at `ptr` to its pool; false when no block starts there.
  bool release(void* ptr) {
    auto context = MemoryHistory::context_if(ContextLevel::All);
    MemoryHistory::DropAfterUnlock drop;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = registry_.find(ptr);
    // A cached block stays registered: freeing it again is refused too.
    if (it == registry_.end() || !it->second->active) {
      return false;
    }
    Block* block = it->second;
    auto& d = *devices_[block->device];
    auto pool = pool_of(block->size);
    block->active = false;
    MemoryHistory::drop_later(std::move(block->context));
    history_.note(
        HistoryAction::FreeRequested, block->device, block->ptr, block->requested, context);
    history_.note(HistoryAction::FreeCompleted, block->device, block->ptr, block->requested,
        std::move(context));
    update(d.stats.allocation, pool, -1);
    update(d.stats.active, pool, -1);
    update(d.stats.allocated_bytes, pool, -static_cast<int64_t>(block->size));
    update(d.stats.active_bytes, pool, -static_cast<int64_t>(block->size));
    update(d.stats.requested_bytes, pool, -static_cast<int64_t>(block->requested));
    report(d, block->device, block->ptr, -static_cast<int64_t>(block->size));
    if (block->adopted || !caching_) {
      unreserve(d, block);
    } else {
      d.free_blocks[block->size].push_back(block);
    }
    return true;
  }

  void set_caching(bool enabled) {
    std::lock_guard<std::mutex> lock(mutex_);
    caching_ = enabled;
    if (!enabled) {
      for (auto& d : devices_) {
        release_cached(*d);
      }
    }
  }

  bool caching() {
    std::lock_guard<std::mutex> lock(mutex_);
    return caching_;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& d : devices_) {
      release_cached(*d);
    }
  }

  c10::DeviceIndex device_of(const void* ptr) {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& d : devices_) {
      auto it = d->segments.upper_bound(p);
      if (it != d->segments.begin()) {
        --it;
        if (p < it->first + it->second->size) {
          return it->second->device;
        }
      }
    }
    return -1;
  }

 private:
  Block* take_cached(DeviceState& d, size_t size) {
    auto it = d.free_blocks.find(size);
    if (it == d.free_blocks.end() || it->second.empty()) {
      return nullptr;
    }
    Block* block = it->second.back();
    it->second.pop_back();
    return block;
  }

  Block* reserve(DeviceState& d, c10::DeviceIndex index, size_t size, size_t nbytes, bool retried) {
    void* ptr = nullptr;
    if (d.reserved + size > capacity(d) || posix_memalign(&ptr, kAlignment, size) != 0) {
      if (!retried) {
        ++d.stats.num_alloc_retries;
        release_cached(d);
        return reserve(d, index, size, nbytes, true);
      }
      fail(d, index, nbytes);
    }
    auto pool = pool_of(size);
    auto* block = new Block{ptr, size, nbytes, index, false, c10::DataPtr()};
    d.reserved += size;
    d.segments.emplace(reinterpret_cast<uintptr_t>(ptr), block);
    register_block(block);
    ++d.stats.num_device_alloc;
    update(d.stats.segment, pool, 1);
    update(d.stats.reserved_bytes, pool, size);
    history_.note(HistoryAction::SegmentAlloc, index, ptr, size, nullptr);
    return block;
  }

  void unreserve(DeviceState& d, Block* block) {
    auto pool = pool_of(block->size);
    history_.note(HistoryAction::SegmentFree, block->device, block->ptr, block->size, nullptr);
    d.reserved -= block->size;
    d.segments.erase(reinterpret_cast<uintptr_t>(block->ptr));
    registry_.erase(block->ptr);
    ++d.stats.num_device_free;
    update(d.stats.segment, pool, -1);
    update(d.stats.reserved_bytes, pool, -static_cast<int64_t>(block->size));
    if (!block->adopted) {
      std::free(block->ptr);
    }
    delete block;
  }

  void release_cached(DeviceState& d) {
    for (auto& [size, blocks] : d.free_blocks) {
      for (Block* b : blocks) {
        unreserve(d, b);
      }
    }
    d.free_blocks.clear();
  }

  [[noreturn]] void fail(DeviceState& d, c10::DeviceIndex index, size_t nbytes) {
    ++d.stats.num_ooms;
    auto allocated = d.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
    history_.note(HistoryAction::Oom, index, nullptr, nbytes, nullptr, hbm_capacity() - d.reserved);
    TORCH_CHECK_WITH(OutOfMemoryError, false,
        "Neuron out of memory on neuron:", static_cast<int>(index), " (", platform_name(),
        " logical NeuronCore ", physical_core(index), "). Tried to allocate ", format(nbytes), "; ",
        format(allocated), " allocated, ", format(d.reserved), " reserved, capacity ",
        format(hbm_capacity()),
        d.fraction < 1.0 ? c10::str(", of which this process may reserve ", format(capacity(d)),
                               " (set_per_process_memory_fraction(", d.fraction, "))")
                         : std::string(),
        ". Free tensors you no longer need, call torch.neuron.empty_cache(), or use a "
        "smaller batch.");
  }

  static std::string format(size_t bytes) {
    char buf[64];
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
      v /= 1024;
      ++u;
    }
    std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
  }

  void register_block(Block* block) { registry_[block->ptr] = block; }

  static size_t capacity(const DeviceState& d) {
    return d.fraction >= 1.0
               ? hbm_capacity()
               : static_cast<size_t>(d.fraction * static_cast<double>(hbm_capacity()));
  }

  // A block handed to a new owner: its stack trace and history entry, and the profiler's
  // memory event (profile_memory=True), which CPU allocations report the same way.
  void activate(DeviceState& d, Block* block, std::shared_ptr<c10::GatheredContext> context) {
    block->active = true;
    if (MemoryHistory::on()) {
      history_.note(HistoryAction::Alloc, block->device, block->ptr, block->requested,
          MemoryHistory::keeps(ContextLevel::Alloc) ? context : nullptr);
      block->context = std::move(context);
    }
    report(d, block->device, block->ptr, static_cast<int64_t>(block->size));
  }

  static void report(DeviceState& d, c10::DeviceIndex index, void* ptr, int64_t delta) {
    if (C10_UNLIKELY(trace::profiling()) && c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(ptr, delta,
          d.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current, d.reserved,
          c10::Device(kNeuron, index));
    }
  }

 public:
 public:
  void set_history(
      bool on, bool trace_all, ContextLevel level, bool cpp, size_t max_entries, bool clear) {
    MemoryHistory::DropAfterUnlock drop;
    std::lock_guard<std::mutex> lock(mutex_);
    history_.configure(on, trace_all, level, cpp, max_entries, clear);
    if (!on) {
      for (auto& [ptr, block] : registry_) {
        MemoryHistory::drop_later(std::move(block->context));
      }
    }
  }

  struct SegmentState {
    c10::DeviceIndex device;
    uintptr_t address;
    size_t size;
    size_t requested;
    bool active;
    std::shared_ptr<c10::GatheredContext> context;
  };

  void set_fraction(c10::DeviceIndex index, double fraction) {
    auto& d = at(index);
    std::lock_guard<std::mutex> lock(mutex_);
    d.fraction = fraction;
  }

  // Every segment (each is one block here) and the history, oldest entry first.
  std::pair<std::vector<SegmentState>, std::vector<HistoryEntry>> snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<SegmentState> segments;
    for (auto& d : devices_) {
      for (auto& [address, block] : d->segments) {
        segments.push_back({block->device, address, block->size,
            block->active ? block->requested : 0, block->active, block->context});
      }
    }
    return {std::move(segments), history_.entries()};
  }

 private:
  std::vector<std::unique_ptr<DeviceState>> devices_;
  // One lock for every pool: the emulated cores share one host, and contention is rare.
  std::mutex mutex_;
  // DataPtr contexts are the data pointers themselves (so raw_allocate works); this maps them
  // back to their blocks.
  std::unordered_map<void*, Block*> registry_;
  MemoryHistory history_; // with the lock held
  bool caching_ = true;
};

Pools& pools() {
  // Leaked on purpose: tensors may be freed during interpreter teardown.
  static Pools* p = new Pools();
  return *p;
}

void release_block(void* ptr) {
  bool owned = pools().release(ptr);
  TORCH_INTERNAL_ASSERT(owned, "freeing neuron memory the allocator does not own");
}

DeviceAllocator g_allocator;

thread_local c10::DeviceIndex tls_pool_device = -1;

// Serves CPU allocations from a device pool inside a DevicePoolScope, and from the regular
// CPU allocator everywhere else.
class PoolAwareCPUAllocator final : public c10::Allocator {
 public:
  explicit PoolAwareCPUAllocator(c10::Allocator* base) : base_(base) {
    base_deleter = base->raw_deleter();
  }

  c10::DataPtr allocate(size_t nbytes) override {
    if (tls_pool_device < 0 || nbytes == 0) {
      return base_->allocate(nbytes);
    }
    auto data = pools().allocate(nbytes, tls_pool_device);
    data.unsafe_set_device(c10::Device(c10::DeviceType::CPU));
    return data;
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release_any; }

  void copy_data(void* dst, const void* src, size_t nbytes) const override {
    std::memcpy(dst, src, nbytes);
  }

 private:
  static void release_any(void* ptr) {
    if (!ptr || !pools().release(ptr)) {
      base_deleter(ptr);
    }
  }

  static c10::DeleterFnPtr base_deleter;
  c10::Allocator* base_;
};

c10::DeleterFnPtr PoolAwareCPUAllocator::base_deleter = nullptr;

const bool g_cpu_allocator_installed = [] {
  static PoolAwareCPUAllocator allocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
  return true;
}();

} // namespace

void record_memory_history(
    bool on, bool trace_all, int context_level, bool cpp, size_t max_entries, bool clear) {
  pools().set_history(
      on, trace_all, static_cast<ContextLevel>(context_level), cpp, max_entries, clear);
}

MemorySnapshot memory_snapshot() {
  reach(Boundary::MemoryStats);
  auto [segments, entries] = pools().snapshot();
  MemorySnapshot out;
  auto slot = [&out](std::shared_ptr<c10::GatheredContext> c) -> int64_t {
    if (!c) {
      return -1;
    }
    out.contexts.push_back(std::move(c));
    return static_cast<int64_t>(out.contexts.size()) - 1;
  };
  for (auto& s : segments) {
    out.segments.insert(out.segments.end(),
        {s.device, static_cast<int64_t>(s.address), static_cast<int64_t>(s.size),
            static_cast<int64_t>(s.requested), s.active ? 1 : 0, slot(std::move(s.context))});
  }
  for (auto& e : entries) {
    out.entries.insert(
        out.entries.end(), {e.device, static_cast<int64_t>(e.action), static_cast<int64_t>(e.addr),
                               static_cast<int64_t>(e.size), e.time_us,
                               static_cast<int64_t>(e.device_free), slot(std::move(e.context))});
  }
  return out;
}

void* raw_alloc(size_t nbytes, c10::DeviceIndex device) {
  if (nbytes == 0) {
    return nullptr;
  }
  // The DataPtr's context is its address (see Pools), so releasing it keeps the block alive.
  return pools().allocate(nbytes, check_device(device)).release_context();
}

bool raw_free(void* ptr) {
  return ptr && pools().release(ptr);
}

void set_caching(bool enabled) {
  pools().set_caching(enabled);
}

bool caching() {
  return pools().caching();
}

void set_memory_fraction(c10::DeviceIndex device, double fraction) {
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0, "Invalid memory fraction ", fraction,
      " for neuron:", static_cast<int>(device), "; pass a value in [0, 1]");
  pools().set_fraction(check_device(device), fraction);
}

DevicePoolScope::DevicePoolScope(c10::DeviceIndex device)
    : previous_(std::exchange(tls_pool_device, device)) {}

DevicePoolScope::~DevicePoolScope() {
  tls_pool_device = previous_;
}

c10::DeviceIndex pool_device_of(const c10::StorageImpl* storage) {
  const auto& data = storage->data_ptr();
  if (data.get_deleter() != &release_block) {
    return -1;
  }
  return pools().owner(data.get());
}

bool claim_for_device(c10::StorageImpl* storage) {
  auto device = pool_device_of(storage);
  if (device < 0) {
    return false;
  }
  storage->mutable_data_ptr().unsafe_set_device(c10::Device(kNeuron, device));
  storage->set_allocator(&g_allocator);
  return true;
}

c10::DataPtr DeviceAllocator::allocate(size_t nbytes) {
  return allocate_on(nbytes, current_device());
}

c10::DataPtr DeviceAllocator::allocate_on(size_t nbytes, c10::DeviceIndex index) {
  if (nbytes == 0) {
    return c10::DataPtr(nullptr, c10::Device(kNeuron, index));
  }
  return pools().allocate(nbytes, index);
}

c10::DeleterFnPtr DeviceAllocator::raw_deleter() const {
  return &release_block;
}

void DeviceAllocator::copy_data(void* dst, const void* src, size_t nbytes) const {
  std::memcpy(dst, src, nbytes);
}

bool DeviceAllocator::initialized() {
  return true;
}

void DeviceAllocator::emptyCache(c10::MempoolId_t) {
  reach(Boundary::MemoryStats);
  pools().empty_cache();
}

void DeviceAllocator::recordStream(const c10::DataPtr&, c10::Stream) {}

DeviceStats DeviceAllocator::getDeviceStats(c10::DeviceIndex device) {
  reach(Boundary::MemoryStats);
  auto& d = pools().at(device);
  auto lock = pools().lock();
  return d.stats;
}

void DeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  reach(Boundary::MemoryStats);
  auto& d = pools().at(device);
  auto lock = pools().lock();
  for_each_stat(d.stats, [](Stat& s) { s.reset_accumulated(); });
  d.stats.num_alloc_retries = 0;
  d.stats.num_ooms = 0;
  d.stats.num_device_alloc = 0;
  d.stats.num_device_free = 0;
}

void DeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  reach(Boundary::MemoryStats);
  auto& d = pools().at(device);
  auto lock = pools().lock();
  for_each_stat(d.stats, [](Stat& s) { s.reset_peak(); });
}

std::pair<size_t, size_t> DeviceAllocator::getMemoryInfo(c10::DeviceIndex device) {
  auto& d = pools().at(device);
  auto lock = pools().lock();
  return {hbm_capacity() - d.reserved, hbm_capacity()};
}

c10::DataPtr DeviceAllocator::adopt(c10::DataPtr&& host, size_t nbytes, c10::DeviceIndex device) {
  return pools().adopt(std::move(host), nbytes, device);
}

c10::DeviceIndex DeviceAllocator::device_of(const void* ptr) {
  return pools().device_of(ptr);
}

DeviceAllocator* device_allocator() {
  return &g_allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace neuron
