#include "runtime/HostAllocator.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace neuron {
namespace {

struct HostBlock {
  void* ptr;
  size_t size;
};

struct HostPool {
  std::mutex mutex;
  std::map<uintptr_t, HostBlock*> blocks; // every block, for is_pinned on interior pointers
  std::unordered_map<size_t, std::vector<HostBlock*>> free_blocks;
  at::HostStats stats;

  template <typename Fn>
  void for_each_stat(Fn fn) {
    for (auto* s :
        {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes}) {
      fn(*s);
    }
  }

  void release_cached() {
    for (auto& [size, list] : free_blocks) {
      for (HostBlock* b : list) {
        blocks.erase(reinterpret_cast<uintptr_t>(b->ptr));
        stats.allocations.decrease(1);
        stats.allocated_bytes.decrease(b->size);
        ++stats.num_host_free;
        std::free(b->ptr);
        delete b;
      }
    }
    free_blocks.clear();
  }
};

HostPool& pool() {
  static HostPool* p = new HostPool();
  return *p;
}

void release(void* ctx) {
  auto* block = static_cast<HostBlock*>(ctx);
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.stats.active_requests.decrease(1);
  p.stats.active_bytes.decrease(block->size);
  p.free_blocks[block->size].push_back(block);
}

HostAllocator g_host_allocator;

} // namespace

at::DataPtr HostAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) {
    return at::DataPtr(nullptr, c10::Device(at::DeviceType::CPU));
  }
  size_t size = c10::llvm::PowerOf2Ceil(nbytes);
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  HostBlock* block = nullptr;
  auto it = p.free_blocks.find(size);
  if (it != p.free_blocks.end() && !it->second.empty()) {
    block = it->second.back();
    it->second.pop_back();
  } else {
    void* ptr = nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&ptr, 64, size) == 0,
        "Out of pinned host memory: tried to allocate ", nbytes, " bytes");
    block = new HostBlock{ptr, size};
    p.blocks.emplace(reinterpret_cast<uintptr_t>(ptr), block);
    p.stats.allocations.increase(1);
    p.stats.allocated_bytes.increase(size);
    ++p.stats.num_host_alloc;
  }
  p.stats.active_requests.increase(1);
  p.stats.active_bytes.increase(size);
  return {block->ptr, block, &release, at::DeviceType::CPU};
}

c10::DeleterFnPtr HostAllocator::raw_deleter() const {
  return nullptr;
}

void HostAllocator::copy_data(void* dst, const void* src, size_t nbytes) const {
  std::memcpy(dst, src, nbytes);
}

bool HostAllocator::record_event(void*, void*, c10::Stream) {
  return true;
}

void HostAllocator::empty_cache() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.release_cached();
}

at::HostStats HostAllocator::get_stats() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.stats;
}

void HostAllocator::reset_accumulated_stats() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.for_each_stat([](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
  p.stats.num_host_alloc = 0;
  p.stats.num_host_free = 0;
}

void HostAllocator::reset_peak_stats() {
  auto& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.for_each_stat([](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
}

bool HostAllocator::is_pinned(const void* ptr) {
  auto& p = pool();
  auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.blocks.upper_bound(addr);
  if (it == p.blocks.begin()) {
    return false;
  }
  --it;
  return addr < it->first + it->second->size;
}

HostAllocator* host_allocator() {
  return &g_host_allocator;
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator);

} // namespace neuron
