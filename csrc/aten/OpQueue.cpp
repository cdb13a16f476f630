#include "aten/OpQueue.h"

#include "aten/Counters.h"
#include "aten/Fallback.h"
#include "aten/HostView.h"
#include "runtime/Allocator.h"
#include "runtime/Boundary.h"
#include "runtime/Config.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/MemoryContext.h"
#include "runtime/Trace.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <c10/util/accumulate.h>
#include <c10/util/strides.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace neuron::queue {
namespace {

// Bytes of each operand one chunk covers: a run's operands stay in the core's cache from one op
// of the run to the next. The host threads take chunks of their own, all of a run in one
// parallel region: a region per op and chunk would, on a busy host, wait each time for a
// descheduled thread.
constexpr int64_t kChunkBytes = 1 << 20;
// Fresh results a queue may hold before it runs: intermediates stay in memory until then.
constexpr int64_t kQueueBytes = 256 << 20;
// Chunks of whole vectors, so that they split no SIMD vector (boundaries are proven harmless by
// the fuzzer anyway; this keeps the fused kernel on ATen's vector path).
constexpr int64_t kChunkAlign = 64;

std::atomic<bool> g_enabled{false};
std::atomic<bool> g_prologue{true};
std::atomic<int64_t> g_limit{64};

// How an op joins the queue: as its out= variant, writing a fresh result or its own `self`.
struct Fusion {
  std::optional<c10::OperatorHandle> out_op;
  bool inplace = false;
  uint64_t dtypes = 0; // one bit per ScalarType
  // The argument whose dtype the result has (where's `self` follows its `condition`).
  size_t self_arg = 0;
  // Arguments that are masks (ATen names them `condition` or `mask`): bool tensors, one bit
  // per argument. Every other tensor argument has the run's dtype.
  uint64_t masks = 0;
  std::string name;
};

// Built once at load (set_fusable) and only read afterwards.
std::unordered_map<const c10::FunctionSchema*, Fusion>& fusions() {
  static auto* table = new std::unordered_map<const c10::FunctionSchema*, Fusion>();
  return *table;
}

uint64_t dtype_bit(c10::ScalarType t) {
  return uint64_t{1} << static_cast<int>(t);
}

// Where a queued op reads or writes a storage: a byte range and the view over it.
struct Use {
  const c10::StorageImpl* storage;
  uintptr_t begin;
  uintptr_t end;
  c10::SmallVector<int64_t, 5> strides;
  bool scalar;
  bool written;
};

struct Entry {
  const Fusion* fusion;
  // The out= variant's arguments; tensors are the queue's own aliases, so that `.data = ...` or
  // set_ on the caller's tensor cannot redirect queued work.
  std::vector<c10::IValue> args;
  std::shared_ptr<c10::GatheredContext> issued_at;
};

// Where a run starts: the op issued before it and its first op.
using Start = std::pair<const c10::FunctionSchema*, const c10::FunctionSchema*>;
struct StartHash {
  size_t operator()(const Start& s) const {
    return std::hash<const void*>()(s.first) * 31 + std::hash<const void*>()(s.second);
  }
};
// A run that held only its first op cost the recording and fused nothing, so ops from the same
// start run at once for a while: 16 times, then twice as often each time it happens again, up
// to 1024; a start that leads to a fused run is forgotten. The program may change phase, which
// is why a start is tried again at all.
struct Alone {
  int skips_left = 0;
  int skips = 0;
};
constexpr int kFirstSkips = 16;
constexpr int kMostSkips = 1024;

// The op this thread issued last, for the start of the next run.
thread_local const c10::FunctionSchema* t_previous = nullptr;

struct Queue {
  std::recursive_mutex mutex;
  std::vector<Entry> entries;
  Start start;
  std::unordered_map<Start, Alone, StartHash> alone;
  std::vector<Use> uses;
  // The queue's own tensors by storage: a fresh result is dropped when the queue's tensors are
  // all that still hold its storage.
  std::unordered_map<const c10::StorageImpl*, size_t> held;
  // The fresh results whose device memory is still allocated: dropped ones give it back (a chain
  // drops each result at the next op, so this stays short).
  std::vector<c10::StorageImpl*> allocated;
  int64_t fresh_bytes = 0;
  c10::DeviceIndex device = -1;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 5> sizes;
};

Queue& the_queue() {
  static auto* q = new Queue();
  return *q;
}

Use use_of(const at::Tensor& t, bool written) {
  const auto item = static_cast<int64_t>(t.itemsize());
  auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    last += (t.size(d) - 1) * t.stride(d);
  }
  return {t.storage().unsafeGetStorageImpl(), begin,
      begin + static_cast<uintptr_t>((last + 1) * item),
      c10::SmallVector<int64_t, 5>(t.strides().begin(), t.strides().end()), t.dim() == 0, written};
}

// Two uses of memory may share a fused kernel when chunk-by-chunk order cannot tell them apart
// from op-by-op order: the same view, disjoint bytes, or both only read.
bool compatible(const Use& a, const Use& b) {
  if (a.storage != b.storage || a.end <= b.begin || b.end <= a.begin) {
    return true;
  }
  if (!a.written && !b.written) {
    return true;
  }
  return a.begin == b.begin && a.scalar == b.scalar && a.strides == b.strides;
}

// The shape `sizes` and `other` broadcast to, in `sizes`; false if they do not.
bool broadcast_into(c10::SmallVector<int64_t, 5>& sizes, c10::IntArrayRef other) {
  if (other.size() > sizes.size()) {
    sizes.insert(sizes.begin(), other.size() - sizes.size(), 1);
  }
  const size_t lead = sizes.size() - other.size();
  for (size_t d = 0; d < other.size(); ++d) {
    auto& s = sizes[lead + d];
    if (other[d] != s && other[d] != 1 && s != 1) {
      return false;
    }
    s = s == 1 ? other[d] : s;
  }
  return true;
}

// Whether a tensor that broadcasts to `shape` takes the chunks' rows (dimension 0) of its own,
// or is read whole by every chunk because it is the same along dimension 0.
bool chunked_by_rows(const at::Tensor& t, c10::IntArrayRef shape) {
  return t.dim() == static_cast<int64_t>(shape.size()) && t.size(0) == shape[0] && shape[0] > 1;
}

// Everything the queue needs to know about a tensor argument of an op whose result has `shape`,
// checked without any lock.
bool eligible_tensor(
    const at::Tensor& t, const at::Tensor& self, c10::IntArrayRef shape, bool written, bool mask) {
  if (!t.defined() || t.is_conj() || t.is_neg() || c10::isComplexType(t.scalar_type())) {
    return false;
  }
  if (t.device().type() != kNeuron) {
    return t.dim() == 0; // a CPU scalar, as elementwise ops accept it
  }
  if (t.device() != self.device()) {
    return false;
  }
  if (t.dim() == 0) {
    return true;
  }
  if (t.scalar_type() != (mask ? c10::ScalarType::Bool : self.scalar_type()) ||
      (written && t.sizes() != shape)) {
    return false;
  }
  // Written tensors, and without prologues every tensor, must be plain contiguous memory.
  return t.is_contiguous() || (!written && g_prologue.load(std::memory_order_relaxed));
}

std::string user_line(const std::shared_ptr<c10::GatheredContext>& issued_at) {
  auto* tb = dynamic_cast<torch::CapturedTraceback*>(issued_at.get());
  if (!tb) {
    return "";
  }
  auto symbolized = torch::symbolize({tb});
  if (symbolized.tracebacks.empty() || symbolized.tracebacks[0].empty()) {
    return "";
  }
  // The innermost frame outside PyTorch and torchneuron is the user's line.
  const auto& frames = symbolized.tracebacks[0];
  auto is_library = [](const std::string& f) {
    return f.find("/torch/") != std::string::npos || f.find("/torch_neuronx/") != std::string::npos;
  };
  auto pick = frames[0];
  for (auto i : frames) {
    if (!is_library(symbolized.all_frames[i].filename)) {
      pick = i;
      break;
    }
  }
  const auto& f = symbolized.all_frames[pick];
  return f.filename + ":" + std::to_string(f.lineno) + " (" + f.funcname + ")";
}

[[noreturn]] void rethrow_attributed(const Entry& e, const std::exception& error) {
  auto line = user_line(e.issued_at);
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  TORCH_CHECK(false, "aten::", e.fusion->name, ", issued at ",
      line.empty() ? std::string("an unknown line") : line,
      " and run later by adaptive eager execution, failed: ",
      c10_error ? c10_error->what_without_backtrace() : error.what(),
      "\n(Set TORCH_NEURONX_ENABLE_CONCATENATION=0 to run every op where it is issued.)");
}

// One operand of a fused kernel: a tensor cut into chunks, or a value every chunk shares.
struct Operand {
  c10::IValue whole;
  c10::Storage host;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  int64_t offset = 0;
  c10::SmallVector<int64_t, 5> sizes;
  c10::SmallVector<int64_t, 5> strides;
  bool chunked = false;
  // An intermediate nothing outside the run can read lives only in a chunk buffer.
  int scratch = -1;
};

// The rows [r0, r1) of dimension 0 of a chunked operand, as a CPU tensor over device memory
// (or over the operand's chunk buffer).
at::Tensor chunk_of(const Operand& o, int64_t r0, int64_t r1, const at::Tensor* scratch) {
  const bool local = o.scratch >= 0;
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(local ? scratch[o.scratch].storage() : o.host),
      c10::DispatchKeySet(c10::DispatchKey::CPU), c10::scalarTypeToTypeMeta(o.dtype));
  auto sizes = o.sizes;
  sizes[0] = r1 - r0;
  t.unsafeGetTensorImpl()->set_sizes_and_strides(
      sizes, o.strides, local ? 0 : o.offset + r0 * o.strides[0]);
  return t;
}

bool dropped(const Queue& q, const c10::StorageImpl* storage) {
  return c10::raw::intrusive_ptr::use_count(const_cast<c10::StorageImpl*>(storage)) ==
         q.held.at(storage);
}

// The chunk-buffer slot of each dropped result, and how many slots there are.
struct Slots {
  std::unordered_map<const c10::StorageImpl*, int> of;
  int count = 0;
};

// The fresh results of a run that the caller has dropped: the fused kernel need not write them
// to memory, and keeps each in a chunk-buffer slot from the op that writes it to the last op
// that uses it. An op after that reuses the slot, as eager's allocator would reuse the freed
// block: a chain then works in two or three buffers that stay in the core's cache.
Slots dropped_results(const Queue& q, const std::vector<Entry>& entries) {
  // Each dropped result's last use; a result is written before any op of the run reads it.
  std::unordered_map<const c10::StorageImpl*, size_t> last_use;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!e.fusion->inplace) {
      auto* storage = e.args.back().toTensor().storage().unsafeGetStorageImpl();
      // A released one stays in its buffer even if a weak reference has revived it since.
      if (storage->data_ptr().get() == nullptr || dropped(q, storage)) {
        last_use.emplace(storage, i);
      }
    }
    for (const auto& v : e.args) {
      auto it = v.isTensor() ? last_use.find(v.toTensor().storage().unsafeGetStorageImpl())
                             : last_use.end();
      if (it != last_use.end()) {
        it->second = i;
      }
    }
  }
  Slots slots;
  std::vector<int> unused;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!e.fusion->inplace) {
      auto* result = e.args.back().toTensor().storage().unsafeGetStorageImpl();
      if (last_use.count(result)) {
        int slot = slots.count;
        if (unused.empty()) {
          ++slots.count;
        } else {
          slot = unused.back();
          unused.pop_back();
        }
        slots.of.emplace(result, slot);
      }
    }
    // Slots whose last use this op was are free for the ops after it (never for its own
    // result, which must not share memory with what it reads).
    for (const auto& v : e.args) {
      if (!v.isTensor()) {
        continue;
      }
      auto* storage = v.toTensor().storage().unsafeGetStorageImpl();
      auto use = last_use.find(storage);
      if (use != last_use.end() && use->second == i) {
        unused.push_back(slots.of.at(storage));
        last_use.erase(use);
      }
    }
  }
  return slots;
}

// Frees the device memory of dropped results, which the fused kernel keeps in a chunk buffer,
// as eager would have freed it by now. Nothing but the queue holds them, so nothing can see the
// memory go.
void release_dropped(Queue& q) {
  auto kept = std::remove_if(q.allocated.begin(), q.allocated.end(), [&q](auto* storage) {
    if (!dropped(q, storage)) {
      return false;
    }
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
    return true;
  });
  q.allocated.erase(kept, q.allocated.end());
}

struct Plan {
  std::string name;
  int64_t rows_per_chunk;
};

// Fused kernels by the structure of their run: ops, dtype, shape and layout.
std::unordered_map<std::string, Plan>& plans() {
  static auto* cache = new std::unordered_map<std::string, Plan>();
  return *cache;
}

const Plan& plan_for(const std::vector<Entry>& entries, const std::vector<Operand>& operands,
    c10::ScalarType dtype, c10::IntArrayRef sizes, bool flat) {
  std::string key = std::to_string(static_cast<int>(dtype)) + (flat ? "f" : "r") + ":";
  for (auto s : sizes) {
    key += "," + std::to_string(s);
  }
  for (const auto& e : entries) {
    key += ";" + e.fusion->name;
  }
  for (const auto& o : operands) {
    key += o.chunked ? "|" : ".";
    for (auto s : o.strides) {
      key += std::to_string(s) + ",";
    }
  }
  auto& cache = plans();
  auto it = cache.find(key);
  if (it != cache.end()) {
    count(Counter::FusionCacheHits);
    return it->second;
  }
  count(Counter::FusionCacheMisses);
  std::string name;
  for (const auto& e : entries) {
    name += (name.empty() ? "" : "+") + e.fusion->name;
  }
  const int64_t numel = c10::multiply_integers(sizes);
  const int64_t row = flat ? 1 : numel / std::max<int64_t>(sizes[0], 1);
  int64_t elements = kChunkBytes / static_cast<int64_t>(c10::elementSize(dtype));
  int64_t rows = flat ? (elements + kChunkAlign - 1) / kChunkAlign * kChunkAlign
                      : std::max<int64_t>(1, elements / std::max<int64_t>(row, 1));
  return cache.emplace(key, Plan{std::move(name), rows}).first->second;
}

// The operands of every entry, in order, and whether the run can treat its tensors as one flat
// range (all contiguous, of the run's shape, nothing broadcast): then chunks are element
// ranges, else row ranges of dimension 0.
struct Operands {
  std::vector<Operand> all;
  std::vector<size_t> first; // per entry, the index of its first operand
  bool flat = true;
};

Operands operands_of(
    const std::vector<Entry>& entries, const Slots& slots, c10::IntArrayRef sizes) {
  Operands ops;
  for (const auto& e : entries) {
    ops.first.push_back(ops.all.size());
    for (const auto& v : e.args) {
      Operand o;
      const bool on_device = v.isTensor() && v.toTensor().device().type() == kNeuron;
      const bool by_rows = on_device && v.toTensor().dim() > 0 &&
                           (v.toTensor().sizes() == sizes || chunked_by_rows(v.toTensor(), sizes));
      if (by_rows) {
        const auto& t = v.toTensor();
        o.chunked = true;
        o.dtype = t.scalar_type();
        auto slot = slots.of.find(t.storage().unsafeGetStorageImpl());
        o.scratch = slot == slots.of.end() ? -1 : slot->second;
        if (o.scratch < 0) {
          o.host = host_storage(t.storage().unsafeGetStorageImpl());
        }
        o.offset = t.storage_offset();
        o.sizes.assign(t.sizes().begin(), t.sizes().end());
        o.strides.assign(t.strides().begin(), t.strides().end());
        ops.flat &= t.is_contiguous() && t.sizes() == sizes;
      } else if (on_device) {
        // A scalar, or a tensor broadcast along the rows, which splits no chunk into pieces.
        ops.flat &= v.toTensor().dim() == 0;
        o.whole = host_view(v.toTensor());
      } else {
        o.whole = v;
      }
      ops.all.push_back(std::move(o));
    }
  }
  for (auto& o : ops.all) {
    if (o.chunked && ops.flat) {
      o.sizes = {c10::multiply_integers(sizes)};
      o.strides = {1};
    } else if (o.scratch >= 0) {
      // Its values live only in the chunk buffer, which holds a chunk in row-major order.
      int64_t stride = 1;
      for (size_t d = o.sizes.size(); d-- > 0;) {
        o.strides[d] = stride;
        stride *= o.sizes[d];
      }
    }
  }
  return ops;
}

// One host buffer per intermediate that lives only in chunks, of at least `bytes`. Host
// memory, taken before the core's scope so that it is not device memory, and kept per thread
// between runs: a fresh buffer each run costs page faults on every chunk.
const std::vector<at::Tensor>& chunk_buffers(size_t count, size_t bytes) {
  static thread_local std::vector<at::Tensor> buffers;
  buffers.resize(std::max(buffers.size(), count));
  for (size_t k = 0; k < count; ++k) {
    if (!buffers[k].defined() || buffers[k].nbytes() < bytes) {
      buffers[k] = at::detail::empty_cpu({static_cast<int64_t>(bytes)}, at::kByte);
    }
  }
  return buffers;
}

void run_fused(std::vector<Entry>& entries, const Slots& slots, c10::DeviceIndex device,
    c10::ScalarType dtype, c10::IntArrayRef sizes) {
  const int64_t numel = c10::multiply_integers(sizes);
  const Operands ops = operands_of(entries, slots, sizes);
  const Plan& plan = plan_for(entries, ops.all, dtype, sizes, ops.flat);
  const int64_t rows = ops.flat ? numel : sizes[0];
  const int64_t chunks = (rows + plan.rows_per_chunk - 1) / plan.rows_per_chunk;
  count(Counter::FusedKernels);
  count(Counter::FusedOps, static_cast<int64_t>(entries.size()));
  const auto chunk_bytes = static_cast<size_t>(std::min(plan.rows_per_chunk, rows) *
                                               (numel / std::max<int64_t>(rows, 1))) *
                           c10::elementSize(dtype);
  // Each worker has a set of buffers of its own.
  const int64_t workers = std::min<int64_t>(chunks, at::get_num_threads());
  const auto& scratch = chunk_buffers(slots.count * workers, chunk_bytes);
  CoreScope core(device, /*pool=*/true, /*rng=*/false);
  trace::Span kernel(
      trace::Kind::Kernel, device, "fused", [&] { return "nc::fused " + plan.name; });
  const auto cpu = c10::DispatchKeySet(c10::DispatchKey::CPU);
  // Workers take the next chunk as they finish one, so that a worker the host deschedules holds
  // up at most the chunk it is on.
  std::atomic<int64_t> next{0};
  // The failure of the earliest op, attributed on this thread once the region has ended: the
  // attribution reads the Python line the op was issued at.
  std::mutex failure_lock;
  std::optional<std::pair<size_t, std::exception_ptr>> failure;
  auto work = [&](int64_t worker) {
    const at::Tensor* buffers = scratch.data() + slots.count * worker;
    torch::jit::Stack stack;
    for (int64_t c = next++; c < chunks; c = next++) {
      const int64_t r0 = c * plan.rows_per_chunk;
      const int64_t r1 = std::min(rows, r0 + plan.rows_per_chunk);
      for (size_t i = 0; i < entries.size(); ++i) {
        stack.clear();
        const size_t n = entries[i].args.size();
        for (size_t k = 0; k < n; ++k) {
          const auto& o = ops.all[ops.first[i] + k];
          stack.emplace_back(o.chunked ? c10::IValue(chunk_of(o, r0, r1, buffers)) : o.whole);
        }
        try {
          entries[i].fusion->out_op->redispatchBoxed(cpu, &stack);
        } catch (...) {
          std::lock_guard<std::mutex> guard(failure_lock);
          if (!failure || failure->first > i) {
            failure.emplace(i, std::current_exception());
          }
          next = chunks;
          return;
        }
      }
    }
  };
  // A lone worker runs on this thread, where the ops of a lone chunk split it across the threads.
  if (workers == 1) {
    work(0);
  } else {
    at::parallel_for(0, workers, 1, [&](int64_t first, int64_t last) {
      for (int64_t w = first; w < last; ++w) {
        work(w);
      }
    });
  }
  if (failure) {
    try {
      std::rethrow_exception(failure->second);
    } catch (const std::exception& error) {
      rethrow_attributed(entries[failure->first], error);
    }
  }
}

void execute(std::vector<Entry>& entries, const Slots& slots, c10::DeviceIndex device,
    c10::ScalarType dtype, c10::IntArrayRef sizes) {
  // A lone op whose result was dropped and released (a run cut short) still runs, for its
  // errors, into a chunk buffer.
  if (entries.size() > 1 || slots.count > 0) {
    run_fused(entries, slots, device, dtype, sizes);
    return;
  }
  auto& e = entries[0];
  torch::jit::Stack stack(e.args.begin(), e.args.end());
  try {
    run_now(*e.fusion->out_op, &stack);
  } catch (const std::exception& error) {
    rethrow_attributed(e, error);
  }
}

// Runs and empties the queue; the caller holds its lock.
void run_locked(Queue& q, Boundary reason) {
  if (q.entries.empty()) {
    return;
  }
  auto entries = std::move(q.entries);
  const auto slots = dropped_results(q, entries);
  q.entries.clear();
  q.uses.clear();
  q.held.clear();
  q.allocated.clear();
  q.fresh_bytes = 0;
  count_queue_run(reason);
  if (entries.size() == 1) {
    auto& a = q.alone[q.start];
    a.skips = std::min(a.skips == 0 ? kFirstSkips : 2 * a.skips, kMostSkips);
    a.skips_left = a.skips;
  } else {
    q.alone.erase(q.start);
  }
  // Cleared once the work has run: until then a reader on another thread sees queued work and
  // waits for this run on the queue's lock.
  struct ClearQueued {
    ~ClearQueued() { g_queued.store(false, std::memory_order_relaxed); }
  } clear;
  execute(entries, slots, q.device, q.dtype, q.sizes);
}

// The allocator's call: a thread that finds the queue busy leaves the release to it.
void release_queued_drops() {
  auto& q = the_queue();
  std::unique_lock<std::recursive_mutex> lock(q.mutex, std::try_to_lock);
  if (lock.owns_lock()) {
    release_dropped(q);
  }
}

void run_queue(Boundary reason) {
  auto& q = the_queue();
  std::lock_guard<std::recursive_mutex> lock(q.mutex);
  run_locked(q, reason);
}

bool decline() {
  reach(Boundary::Op);
  return false;
}

// The strides ATen gives the result of `op` on these arguments: with strided operands (views
// read as prologues) it follows their layout, as TensorIterator does, so it is asked on meta
// tensors; contiguous operands give a contiguous result.
c10::SmallVector<int64_t, 5> result_strides(const c10::OperatorHandle& op,
    const torch::jit::Stack& stack, size_t first, c10::IntArrayRef shape, bool strided) {
  if (!strided) {
    return c10::contiguous_strides(shape);
  }
  torch::jit::Stack meta;
  for (size_t i = first; i < stack.size(); ++i) {
    const auto& v = stack[i];
    if (v.isTensor() && v.toTensor().device().type() == kNeuron) {
      const auto& t = v.toTensor();
      meta.emplace_back(at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta)));
    } else {
      meta.push_back(v);
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  auto strides = meta.back().toTensor().strides();
  return c10::SmallVector<int64_t, 5>(strides.begin(), strides.end());
}

// The shape of the result, which the tensor operands broadcast to, if the op can be queued:
// its self is a neuron tensor of a fusable dtype, the result spans more than one chunk,
// and every operand is one a chunk of the run can read.
std::optional<c10::SmallVector<int64_t, 5>> queueable_shape(
    const Fusion& f, const torch::jit::Stack& stack, size_t first) {
  if (!stack[first + f.self_arg].isTensor()) {
    return std::nullopt;
  }
  const at::Tensor& self = stack[first + f.self_arg].toTensor();
  if (self.device().type() != kNeuron || (f.dtypes & dtype_bit(self.scalar_type())) == 0) {
    return std::nullopt;
  }
  c10::SmallVector<int64_t, 5> shape;
  for (size_t i = first; i < stack.size(); ++i) {
    if (stack[i].isTensor() && !broadcast_into(shape, stack[i].toTensor().sizes())) {
      return std::nullopt;
    }
  }
  // A run of one chunk calls each op's kernel once on the whole tensor, as eager does: only
  // ops on more than a chunk can gain from fusion, and recording costs the others time.
  if (shape.empty() || c10::multiply_integers(shape) * self.itemsize() <= kChunkBytes) {
    return std::nullopt;
  }
  for (size_t i = first; i < stack.size(); ++i) {
    const auto& v = stack[i];
    const bool mask = (f.masks >> (i - first)) & 1;
    if (v.isTensor() ? !eligible_tensor(v.toTensor(), self, shape, i == first && f.inplace, mask)
                     : (v.isList() || v.isComplexDouble())) {
      return std::nullopt;
    }
  }
  return shape;
}

// Whether ops from this start still run at once, having made a run of one op before.
bool runs_alone(Queue& q, const Start& start) {
  std::lock_guard<std::recursive_mutex> lock(q.mutex);
  auto a = q.entries.empty() ? q.alone.find(start) : q.alone.end();
  if (a == q.alone.end() || a->second.skips_left <= 0) {
    return false;
  }
  --a->second.skips_left;
  count(Counter::RunAlone);
  return true;
}

// The entry's arguments: the queue's own aliases of neuron tensors, CPU scalars by value;
// and where the op reads and writes device memory.
void capture(const Fusion& f, const torch::jit::Stack& stack, size_t first, Entry& e,
    std::vector<Use>& uses) {
  e.args.reserve(stack.size() - first + 1);
  for (size_t i = first; i < stack.size(); ++i) {
    const auto& v = stack[i];
    if (v.isTensor() && v.toTensor().device().type() == kNeuron) {
      const auto& t = v.toTensor();
      uses.push_back(use_of(t, i == first && f.inplace));
      e.args.emplace_back(tensor_over(t.storage(), t, c10::DispatchKey::PrivateUse1));
    } else if (v.isTensor()) {
      // A CPU scalar's value now: host code may change it before the queue runs.
      e.args.emplace_back(v.toTensor().clone());
    } else {
      e.args.push_back(v);
    }
  }
}

bool compatible_among(const std::vector<Use>& uses) {
  for (size_t i = 0; i < uses.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!compatible(uses[i], uses[j])) {
        return false;
      }
    }
  }
  return true;
}

// Runs what is queued first if the op cannot join it: another device, dtype or shape, or an
// overlap with queued memory that a fused run would get wrong.
void make_room(
    Queue& q, const at::Tensor& self, c10::IntArrayRef shape, const std::vector<Use>& uses) {
  if (!q.entries.empty() &&
      (q.device != self.device().index() || q.dtype != self.scalar_type() || shape != q.sizes)) {
    run_locked(q, Boundary::Shape);
  }
  for (const auto& u : uses) {
    for (const auto& queued : q.uses) {
      if (!compatible(u, queued)) {
        run_locked(q, Boundary::Alias);
        return;
      }
    }
  }
}

// The op's result, which the caller gets now: an in-place op's self, or fresh device memory
// that the run writes, laid out as ATen would lay it out.
c10::IValue bind_result(Queue& q, const Fusion& f, const c10::OperatorHandle& op,
    const torch::jit::Stack& stack, size_t first, c10::IntArrayRef shape, Entry& e,
    std::vector<Use>& uses) {
  if (f.inplace) {
    e.args.push_back(e.args.front());
    return stack[first];
  }
  const at::Tensor& self = stack[first + f.self_arg].toTensor();
  c10::DeviceGuard guard(self.device());
  bool strided = false;
  for (size_t i = first; i < stack.size(); ++i) {
    strided |= stack[i].isTensor() && !stack[i].toTensor().is_contiguous();
  }
  at::Tensor out = at::detail::empty_strided_generic(shape,
      result_strides(op, stack, first, shape, strided), device_allocator(),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), self.scalar_type());
  // Fresh memory, so it can alias nothing queued.
  uses.push_back(use_of(out, /*written=*/true));
  q.fresh_bytes += static_cast<int64_t>(out.nbytes());
  e.args.emplace_back(tensor_over(out.storage(), out, c10::DispatchKey::PrivateUse1));
  return out;
}

// Adds the entry to the queue, with what the queue now holds of device memory.
void admit(Queue& q, Entry&& e, const std::vector<Use>& uses, const Start& start,
    const at::Tensor& self, c10::IntArrayRef shape, bool inplace) {
  if (q.entries.empty()) {
    q.start = start;
    q.device = self.device().index();
    q.dtype = self.scalar_type();
    q.sizes.assign(shape.begin(), shape.end());
  }
  q.uses.insert(q.uses.end(), uses.begin(), uses.end());
  // An in-place op's out= argument is its self, the same tensor.
  for (size_t k = 0; k < e.args.size() - (inplace ? 1 : 0); ++k) {
    const auto& v = e.args[k];
    if (v.isTensor() && v.toTensor().device().type() == kNeuron) {
      ++q.held[v.toTensor().storage().unsafeGetStorageImpl()];
    }
  }
  if (!inplace) {
    q.allocated.push_back(e.args.back().toTensor().storage().unsafeGetStorageImpl());
  }
  q.entries.push_back(std::move(e));
  g_queued.store(true, std::memory_order_relaxed);
  count(Counter::QueuedOps);
}

bool enqueue(
    const Fusion& f, const c10::OperatorHandle& op, torch::jit::Stack& stack, Start start) {
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack.size() - nargs;
  auto shape = queueable_shape(f, stack, first);
  if (!shape) {
    return decline();
  }
  auto& q = the_queue();
  if (runs_alone(q, start)) {
    return false;
  }
  // Outside the lock: gathering the Python stack takes the GIL, which a thread waiting for the
  // queue may hold.
  auto issued_at = memory_context::gather(/*cpp=*/false);
  std::lock_guard<std::recursive_mutex> lock(q.mutex);
  Entry e{&f, {}, std::move(issued_at)};
  std::vector<Use> uses;
  capture(f, stack, first, e, uses);
  if (!compatible_among(uses)) {
    return decline();
  }
  const at::Tensor self = stack[first + f.self_arg].toTensor();
  make_room(q, self, *shape, uses);
  c10::IValue result = bind_result(q, f, op, stack, first, *shape, e, uses);
  admit(q, std::move(e), uses, start, self, *shape, f.inplace);
  torch::jit::drop(stack, nargs);
  stack.push_back(std::move(result));
  if (static_cast<int64_t>(q.entries.size()) >= g_limit.load(std::memory_order_relaxed) ||
      q.fresh_bytes >= kQueueBytes) {
    run_locked(q, Boundary::Size);
  }
  return true;
}

} // namespace

bool record(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!g_enabled.load(std::memory_order_relaxed)) {
    return false;
  }
  const auto* previous = t_previous;
  t_previous = &op.schema();
  const auto& table = fusions();
  auto it = table.find(&op.schema());
  if (it == table.end() || at::globalContext().deterministicAlgorithms()) {
    return decline();
  }
  return enqueue(it->second, op, *stack, {previous, &op.schema()});
}

// What the queue learnt about runs that fuse nothing holds for the mode it was learnt in.
void forget_runs() {
  auto& q = the_queue();
  std::lock_guard<std::recursive_mutex> lock(q.mutex);
  q.alone.clear();
}

void set_enabled(bool on) {
  if (!on) {
    reach(Boundary::Op);
  }
  forget_runs();
  g_enabled = on;
}

bool enabled() {
  return g_enabled.load();
}

void set_prologue(bool on) {
  reach(Boundary::Op);
  g_prologue = on;
}

bool prologue() {
  return g_prologue.load();
}

void set_limit(int64_t ops) {
  TORCH_CHECK(ops >= 1, "The op queue must hold at least 1 op, got ", ops);
  reach(Boundary::Size);
  forget_runs();
  g_limit = ops;
}

int64_t limit() {
  return g_limit.load();
}

void set_fusable(const std::vector<std::string>& ops, const std::vector<std::string>& dtypes) {
  TORCH_CHECK(ops.size() == dtypes.size(), "set_fusable needs one dtype per op");
  // Read here rather than at load, so that a bad value raises in Python instead of aborting.
  auto limit = config::integer(config::kQueueLimit);
  TORCH_CHECK(limit >= 1, config::kQueueLimit.name, "=", limit,
      " cannot hold an op; use a positive number of ops");
  g_limit = limit;
  g_prologue = config::flag(config::kPrologue);
  g_enabled = config::flag(config::kConcatenation);
  set_queued_work_runner(&run_queue);
  set_dropped_work_releaser(&release_queued_drops);
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_map<std::string, std::vector<c10::OperatorName>> overloads;
  for (auto& name : dispatcher.getAllOpNames()) {
    overloads[name.name].push_back(name);
  }
  auto& table = fusions();
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& qualified = ops[i];
    auto dot = qualified.find('.');
    std::string base = "aten::" + qualified.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
    auto op = dispatcher.findSchema({base, overload});
    TORCH_CHECK(op, "op_policy.json names fusable op '", qualified, "', which does not exist");
    const auto& args = op->schema().arguments();
    bool inplace = base.back() == '_';
    std::string functional = inplace ? base.substr(0, base.size() - 1) : base;
    std::optional<c10::OperatorHandle> out;
    for (const auto& name : overloads[functional]) {
      auto candidate = dispatcher.findSchema(name);
      const auto& cargs = candidate->schema().arguments();
      if (cargs.size() != args.size() + 1 || cargs.back().name() != "out") {
        continue;
      }
      bool same = true;
      for (size_t k = 0; k < args.size(); ++k) {
        same &= cargs[k].name() == args[k].name() && *cargs[k].type() == *args[k].type();
      }
      if (same) {
        out = candidate;
        break;
      }
    }
    TORCH_CHECK(out, "fusable op '", qualified, "' has no out= variant to run chunks with");
    std::optional<c10::ScalarType> dtype;
    for (int t = 0; t < static_cast<int>(c10::ScalarType::NumOptions); ++t) {
      if (dtypes[i] == c10::toString(static_cast<c10::ScalarType>(t))) {
        dtype = static_cast<c10::ScalarType>(t);
      }
    }
    TORCH_CHECK(dtype, "fusable op '", qualified, "' names unknown dtype '", dtypes[i], "'");
    auto& f = table[&op->schema()];
    f.out_op = out;
    f.inplace = inplace;
    for (size_t k = 0; k < args.size(); ++k) {
      const auto& name = args[k].name();
      if (name == "self") {
        f.self_arg = k;
      }
      if (name == "condition" || name == "mask") {
        f.masks |= uint64_t{1} << k;
      }
    }
    f.dtypes |= dtype_bit(*dtype);
    f.name = qualified;
  }
}

} // namespace neuron::queue
