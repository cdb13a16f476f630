#include "aten/Fallback.h"

#include "aten/Counters.h"
#include "aten/Exclusions.h"
#include "aten/HostView.h"
#include "aten/OpQueue.h"
#include "aten/Policy.h"
#include "aten/Upcalls.h"
#include "runtime/Allocator.h"
#include "runtime/Boundary.h"
#include "runtime/CoreScope.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/Trace.h"

#include <ATen/core/TensorBody.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron {
namespace {

struct StorageAlias {
  c10::StorageImpl* device;
  c10::Storage host;
};

struct TensorArg {
  at::Tensor device;
  at::Tensor host;
  bool writable;
};

c10::Storage copy_to_host(c10::StorageImpl* device_storage) {
  size_t nbytes = device_storage->nbytes();
  count(Counter::DeviceToHostCopies);
  count(Counter::DeviceToHostBytes, static_cast<int64_t>(nbytes));
  auto storage =
      c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
          nbytes, c10::GetCPUAllocator()->allocate(nbytes), c10::GetCPUAllocator(), true));
  if (nbytes > 0) {
    std::memcpy(storage.mutable_data(), device_storage->data(), nbytes);
  }
  return storage;
}

// Makes `dev` hold `nbytes` of fresh device memory on its own device.
void reallocate(c10::StorageImpl* dev, size_t nbytes) {
  dev->set_data_ptr_noswap(device_allocator()->allocate_on(nbytes, dev->device().index()));
  dev->set_nbytes(nbytes);
}

struct ArgInfo {
  bool writable;
  bool generator;
  bool memory_format;
  bool indices;
};

struct OpInfo {
  c10::OperatorName name;
  std::vector<ArgInfo> args;
  // Per return: whether it aliases an argument. A view holds no values the op produced, and a
  // written argument is checked as an argument.
  std::vector<bool> aliased_returns;
  bool has_generator;
  // Draws random numbers from the default CPU generator, having no generator argument.
  bool implicit_rng;
  bool fp8_data_op;
  // aten::random_ and its functional twin draw integers in [from, to): the positions of those
  // arguments (-1 when the overload has none), for the int64 fold (fold_random_int64).
  bool random_range;
  int from_arg;
  int to_arg;
  // Defined by another library with a CPU kernel and no neuron kernel: the CPU-fallback tier.
  bool library_op;
  OpCounts* counts;
  uint64_t namespaces_version;
};

struct NativeNamespaces {
  std::mutex mutex;
  std::unordered_set<std::string> names;
  // Bumped by each change, so that op_info recomputes what it cached under the old set.
  std::atomic<uint64_t> version{0};
};

NativeNamespaces& native_namespaces() {
  static auto* namespaces = new NativeNamespaces();
  return *namespaces;
}

bool is_library_op(const c10::OperatorHandle& op) {
  const auto& name = op.schema().name();
  auto ns = name.substr(0, name.find("::"));
  if (ns == "aten" || !op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
    return false;
  }
  auto& native = native_namespaces();
  std::lock_guard<std::mutex> lock(native.mutex);
  return native.names.count(ns) == 0;
}

// What the host-kernel path needs to know about an op, computed once per op and thread.
const OpInfo& op_info(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  thread_local std::unordered_map<const c10::FunctionSchema*, OpInfo> cache;
  const auto version = native_namespaces().version.load(std::memory_order_acquire);
  auto it = cache.find(&schema);
  if (it != cache.end() && it->second.name == schema.operator_name() &&
      it->second.namespaces_version == version) {
    return it->second;
  }
  std::vector<ArgInfo> args;
  bool has_generator = false;
  for (const auto& arg : schema.arguments()) {
    const auto& type = arg.type();
    bool generator = type->kind() == c10::TypeKind::GeneratorType ||
                     (type->kind() == c10::TypeKind::OptionalType &&
                         type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
                             c10::TypeKind::GeneratorType);
    args.push_back({arg.alias_info() && arg.alias_info()->isWrite(), generator,
        arg.name() == "memory_format", arg.name() == "indices"});
    has_generator |= generator;
  }
  std::vector<bool> aliased_returns;
  for (const auto& ret : schema.returns()) {
    aliased_returns.push_back(ret.alias_info() != nullptr);
  }
  bool implicit_rng = !has_generator && op.hasTag(at::Tag::nondeterministic_seeded);
  bool fp8_data_op = fp8_data_ops().count(c10::toString(schema.operator_name())) > 0;
  bool random_range = schema.name() == "aten::random_" || schema.name() == "aten::random";
  auto position = [&](const char* name) {
    auto index = schema.argumentIndexWithName(name);
    return random_range && index ? static_cast<int>(*index) : -1;
  };
  return cache
      .insert_or_assign(&schema,
          OpInfo{schema.operator_name(), std::move(args), std::move(aliased_returns), has_generator,
              implicit_rng, fp8_data_op, random_range, position("from"), position("to"),
              is_library_op(op), op_counts(c10::toString(schema.operator_name())), version})
      .first->second;
}

bool is_channels_last(const c10::IValue& v) {
  if (!v.isInt()) {
    return false;
  }
  auto f = static_cast<c10::MemoryFormat>(v.toInt());
  return f == c10::MemoryFormat::ChannelsLast || f == c10::MemoryFormat::ChannelsLast3d;
}

void announce(OpCounts& counts, bool compiled) {
  TORCH_CHECK(fallback_enabled(), "Operator '", counts.name,
      "' has no native neuron implementation and ", exclusion(Excluded::FallbackDisabled).message,
      ". ", way_out(Excluded::FallbackDisabled));
  counts.fallback.fetch_add(1, std::memory_order_relaxed);
  if (compiled) {
    counts.compiled_fallback.fetch_add(1, std::memory_order_relaxed);
  }
  if (!counts.warned.exchange(true)) {
    log("WARNING", "Operator '" + counts.name + "' executed via CPU fallback" +
                       (compiled ? " (in a compiled graph)" : ""));
  }
}

// Which tier runs an op: natively on device memory, or through the CPU fallback's copies; an
// op with no route of its own takes the tier of its owner (op_info's library_op).
enum class Tier { Native, CpuFallback, ByOwner };

class HostCall {
 public:
  HostCall(const c10::OperatorHandle& op, torch::jit::Stack* stack, Tier tier)
      : op_(op),
        schema_(op.schema()),
        stack_(*stack),
        info_(op_info(op)),
        copy_(tier == Tier::CpuFallback || (tier == Tier::ByOwner && info_.library_op)) {}

  void run() {
    const auto& info = info_;
    // `torchneuron check` reports what each fallback call cost: its copies and host time.
    const bool observed = copy_ && observing();
    const auto start =
        observed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    fp8_data_op_ = info.fp8_data_op;
    if (copy_) {
      announce(*info.counts, /*compiled=*/false);
    } else {
      info.counts->native.fetch_add(1, std::memory_order_relaxed);
    }
    const auto& args = schema_.arguments();
    const size_t first = stack_.size() - args.size();
    // The CPU-fallback tier's copies are device activity too (as are the kernels, below).
    trace::Span copies_in;
    if (copy_ && trace::collecting()) {
      copies_in.begin(trace::Kind::Memcpy, -1, "cpu_fallback",
          "Memcpy DtoH (neuron -> host, CPU fallback of " + info.counts->name + ")");
    }
    for (size_t i = 0; i < args.size(); ++i) {
      prepare(args[i], info.args[i], stack_[first + i]);
    }
    if (device_ < 0) {
      device_ = current_device();
    }
    finish_copies(copies_in, 0);
    // Where this op's random numbers come from, for `torchneuron check` and `parity`.
    const char* random_source = nullptr;
    if (info.has_generator || info.implicit_rng) {
      random_source = rng_source() == RngSource::Cpu ? "cpu" : "device";
    }
    if (info.has_generator) {
      for (size_t i = 0; i < args.size(); ++i) {
        if (info.args[i].generator) {
          if (stack_[first + i].isGenerator() && stack_[first + i].toGenerator().defined()) {
            random_source = "generator";
          }
          swap_generator(stack_[first + i]);
        }
      }
    }
    const bool fold = info.random_range && policy_64bit() == Policy64::Narrow;
    const int64_t random_low =
        fold && info.from_arg >= 0 ? stack_[first + info.from_arg].toInt() : 0;
    int64_t random_high = std::numeric_limits<int64_t>::max();
    if (fold && info.to_arg >= 0 && !stack_[first + info.to_arg].isNone()) {
      random_high = stack_[first + info.to_arg].toInt();
    }
    {
      // The fallback tier copies results back, so only native ops write into the pool.
      CoreScope core(device_, /*pool=*/!copy_, /*rng=*/info.implicit_rng);
      trace::Span kernel(trace::Kind::Kernel, device_, copy_ ? "cpu_fallback" : "eager",
          [&] { return (copy_ ? "nc::cpu_fallback " : "nc::") + info.counts->name; });
      call();
    }
    if (fold || (random_source && observing())) {
      const bool returns_tensor = !schema_.returns().empty() && stack_.back().isTensor();
      const at::Tensor* drawn = returns_tensor ? &stack_.back().toTensor() : nullptr;
      if (fold && drawn) {
        fold_random_int64(*drawn, random_low, random_high, info.counts->name);
      }
      if (random_source && observing()) {
        observe("random", info.counts->name, random_source, {drawn ? drawn->numel() : 0});
      }
    }
    trace::Span copies_out;
    if (copy_ && trace::collecting()) {
      copies_out.begin(trace::Kind::Memcpy, device_, "cpu_fallback",
          "Memcpy HtoD (host -> neuron, CPU fallback of " + info.counts->name + ")");
    }
    const int64_t copied_in = copied_;
    write_back();
    const size_t nret = schema_.returns().size();
    for (size_t i = stack_.size() - nret; i < stack_.size(); ++i) {
      finish(stack_[i]);
    }
    finish_copies(copies_out, copied_in);
    if (policy_64bit() != Policy64::Native) {
      narrow_results(info.aliased_returns);
    }
    if (observed) {
      auto elapsed = std::chrono::steady_clock::now() - start;
      observe("fallback", info.counts->name, "",
          {copied_, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()});
    }
  }

 private:
  // Records the copies made since `copied_before` bytes, or none when nothing moved.
  void finish_copies(trace::Span& span, int64_t copied_before) {
    if (!span.active()) {
      return;
    }
    if (copied_ == copied_before) {
      span.discard();
      return;
    }
    span.set_device(device_);
    span.add_bytes(copied_ - copied_before);
    span.finish();
  }

  // Values the device now holds are 32-bit; see Policy.h. Only values the op wrote are
  // looked at: a view of an argument may show memory nothing has written yet.
  void narrow_results(const std::vector<bool>& aliased_returns) {
    auto narrow = [this](const at::Tensor& t) {
      if (t.defined() && t.device().type() == kNeuron && is_64bit(t.scalar_type())) {
        enforce_64bit(t, c10::toString(schema_.operator_name()));
      }
    };
    for (const auto& ta : tensors_) {
      if (ta.writable) {
        narrow(ta.device);
      }
    }
    const size_t first = stack_.size() - aliased_returns.size();
    for (size_t i = 0; i < aliased_returns.size(); ++i) {
      if (aliased_returns[i]) {
        continue;
      }
      const auto& v = stack_[first + i];
      if (v.isTensor()) {
        narrow(v.toTensor());
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList()) {
          narrow(t);
        }
      }
    }
  }

  void prepare(const c10::Argument& arg, const ArgInfo& info, c10::IValue& v) {
    if (v.isTensor()) {
      v = to_host(v.toTensor(), arg, info);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t i = 0; i < list.size(); ++i) {
        list[i] = to_host(list[i], arg, info);
      }
    } else if (v.isList() && arg.type()->kind() == c10::TypeKind::ListType) {
      auto list = v.toList();
      for (size_t i = 0; i < list.size(); ++i) {
        c10::IValue e = list.get(i);
        if (e.isTensor()) {
          list.set(i, to_host(e.toTensor(), arg, info));
        }
      }
    } else if (v.isDevice()) {
      auto d = v.toDevice();
      if (d.type() == kNeuron) {
        note_device(check_device(d.index()), arg);
        v = c10::Device(c10::DeviceType::CPU);
      }
    } else if (info.memory_format && is_channels_last(v)) {
      const auto& row = exclusion(Excluded::ChannelsLast);
      observe("excluded", c10::toString(schema_.operator_name()), row.id);
      TORCH_CHECK(false, row.message, ", but ", schema_.operator_name(), " was asked for ",
          static_cast<c10::MemoryFormat>(v.toInt()), ". ", way_out(Excluded::ChannelsLast));
    }
  }

  void swap_generator(c10::IValue& v) {
    std::optional<at::Generator> gen;
    if (v.isGenerator()) {
      gen = v.toGenerator();
    }
    v = host_generator(gen, device_);
  }

  void note_device(c10::DeviceIndex index, const c10::Argument& arg) {
    if (device_ < 0) {
      device_ = index;
      return;
    }
    TORCH_CHECK(device_ == index, "Expected all tensors to be on the same device, but got ",
        arg.name(), " is on neuron:", static_cast<int>(index),
        ", different from other tensors on neuron:", static_cast<int>(device_),
        " (when checking argument in method ", schema_.operator_name(), ")");
  }

  at::Tensor to_host(const at::Tensor& t, const c10::Argument& arg, const ArgInfo& info) {
    if (!t.defined()) {
      return t;
    }
    if (t.device().type() != kNeuron) {
      // 0-dim CPU tensors are scalars; CPU index tensors are accepted as CUDA accepts them.
      if (t.dim() > 0 && !info.indices) {
        cpu_operand_ = &arg;
      }
      check_mixing();
      return t;
    }
    note_device(t.device().index(), arg);
    check_mixing();
    // One host tensor per device tensor, so that kernels see arguments that are the same tensor
    // as the same tensor (ATen's identity and overlap checks).
    for (auto& ta : tensors_) {
      if (ta.device.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        ta.writable |= info.writable;
        return ta.host;
      }
    }
    // The CPU-fallback tier takes FP8 too (FP8 scaled matmul runs there, docs/limitations.md).
    TORCH_CHECK(!is_fp8(t.scalar_type()) || fp8_data_op_ || copy_, schema_.operator_name(), " on ",
        t.scalar_type(), " neuron tensors: ", exclusion(Excluded::FP8Compute).message,
        " (FP8 tensors can be created, copied and cast here). ", way_out(Excluded::FP8Compute));
    auto* dev = t.storage().unsafeGetStorageImpl();
    const c10::Storage* host = nullptr;
    for (const auto& a : storages_) {
      if (a.device == dev) {
        host = &a.host;
        break;
      }
    }
    if (!host) {
      if (copy_) {
        copied_ += static_cast<int64_t>(dev->nbytes());
      }
      storages_.push_back({dev, copy_ ? copy_to_host(dev) : host_storage(dev)});
      host = &storages_.back().host;
    }
    auto h = tensor_over(*host, t, c10::DispatchKey::CPU);
    tensors_.push_back({t, h, info.writable});
    return h;
  }

  void check_mixing() {
    TORCH_CHECK(!(cpu_operand_ && device_ >= 0),
        "Expected all tensors to be on the same device, but got ", cpu_operand_->name(),
        " is on cpu, different from other tensors on neuron:", static_cast<int>(device_),
        " (when checking argument in method ", schema_.operator_name(), ")");
  }

  void call() {
    try {
      op_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack_);
    } catch (const c10::NotImplementedError&) {
      if (!op_.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU)) {
        observe("no_kernel", c10::toString(schema_.operator_name()));
      }
      TORCH_CHECK_NOT_IMPLEMENTED(op_.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU),
          "The operator '", schema_.operator_name(),
          "' is not supported on the neuron device: "
          "it has no neuron kernel and no CPU kernel to run on the emulated NeuronCore (it exists "
          "only for another backend, such as CUDA or cuDNN). Use an equivalent op that has a "
          "CPU implementation.");
      throw;
    }
  }

  const StorageAlias* alias_of(const c10::StorageImpl* host) const {
    for (const auto& a : storages_) {
      if (a.host.unsafeGetStorageImpl() == host) {
        return &a;
      }
    }
    return nullptr;
  }

  // Carries what a host kernel did to mutable arguments (resize, rebind, data) back to the device.
  void write_back() {
    for (auto& ta : tensors_) {
      if (!ta.writable) {
        continue;
      }
      auto* himpl = ta.host.unsafeGetTensorImpl();
      auto* dimpl = ta.device.unsafeGetTensorImpl();
      const auto* alias = alias_of(himpl->storage().unsafeGetStorageImpl());
      if (alias) {
        auto* hs = alias->host.unsafeGetStorageImpl();
        auto* ds = alias->device;
        bool moved = hs->data() != ds->data() || hs->nbytes() != ds->nbytes();
        if (copy_ || moved) {
          if (hs->nbytes() != ds->nbytes() || (!copy_ && moved)) {
            reallocate(ds, hs->nbytes());
          }
          if (hs->nbytes() > 0 && ds->data() != hs->data()) {
            std::memcpy(ds->mutable_data(), hs->data(), hs->nbytes());
            copied_ += static_cast<int64_t>(hs->nbytes());
            count(Counter::HostToDeviceCopies);
            count(Counter::HostToDeviceBytes, static_cast<int64_t>(hs->nbytes()));
          }
        }
      } else {
        dimpl->set_storage_keep_dtype(device_storage_from(himpl->storage(), device_));
      }
      if (dimpl->sizes() != himpl->sizes() || dimpl->strides() != himpl->strides() ||
          dimpl->storage_offset() != himpl->storage_offset()) {
        dimpl->set_sizes_and_strides(himpl->sizes(), himpl->strides(), himpl->storage_offset());
      }
    }
  }

  at::Tensor to_device_tensor(at::Tensor&& h) {
    if (!h.defined() || h.device().type() != c10::DeviceType::CPU) {
      return std::move(h);
    }
    if (h.is_quantized()) {
      refuse_excluded(Excluded::Quantized, c10::toString(schema_.operator_name()));
    }
    if (h.layout() != c10::kStrided) {
      refuse_excluded(Excluded::Sparse, c10::toString(schema_.operator_name()));
    }
    for (const auto& ta : tensors_) {
      if (ta.host.unsafeGetTensorImpl() == h.unsafeGetTensorImpl()) {
        return ta.device;
      }
    }
    if (const auto* alias = alias_of(h.storage().unsafeGetStorageImpl())) {
      return tensor_over(
          c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(alias->device)), h,
          c10::DispatchKey::PrivateUse1);
    }
    if (copy_) {
      copied_ += static_cast<int64_t>(h.storage().nbytes());
      count(Counter::HostToDeviceCopies);
      count(Counter::HostToDeviceBytes, static_cast<int64_t>(h.storage().nbytes()));
      return to_device(std::move(h), device_);
    }
    return claim_or_move(std::move(h), device_);
  }

  void finish(c10::IValue& v) {
    if (v.isTensor()) {
      v = to_device_tensor(std::move(v).toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t i = 0; i < list.size(); ++i) {
        list.set(i, to_device_tensor(list.extract(i)));
      }
    }
  }

  const c10::OperatorHandle& op_;
  const c10::FunctionSchema& schema_;
  torch::jit::Stack& stack_;
  const OpInfo& info_;
  const bool copy_;
  bool fp8_data_op_ = false;
  c10::DeviceIndex device_ = -1;
  // Bytes the CPU-fallback tier copied between device and host in this call.
  int64_t copied_ = 0;
  const c10::Argument* cpu_operand_ = nullptr;
  c10::SmallVector<StorageAlias, 4> storages_;
  c10::SmallVector<TensorArg, 4> tensors_;
};

} // namespace

void run_native(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!queue::record(op, stack)) {
    HostCall(op, stack, Tier::Native).run();
  }
}

void run_now(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  HostCall(op, stack, Tier::Native).run();
}

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  reach(Boundary::Op);
  HostCall(op, stack, Tier::CpuFallback).run();
}

void announce_fallback(const std::string& op, bool compiled) {
  announce(*op_counts(op), compiled);
}

bool takes_library_fallback(const std::string& name) {
  const auto dot = name.find('.', name.find("::"));
  const auto op = c10::Dispatcher::singleton().findOp(
      {name.substr(0, dot), dot == std::string::npos ? std::string() : name.substr(dot + 1)});
  if (!op) {
    return false;
  }
  for (auto key : {c10::DispatchKey::PrivateUse1, c10::DispatchKey::CompositeExplicitAutograd,
           c10::DispatchKey::CompositeExplicitAutogradNonFunctional,
           c10::DispatchKey::CompositeImplicitAutograd}) {
    if (op->hasKernelForDispatchKey(key)) {
      return false;
    }
  }
  return is_library_op(*op);
}

void add_native_namespaces(const std::vector<std::string>& namespaces) {
  auto& native = native_namespaces();
  std::lock_guard<std::mutex> lock(native.mutex);
  native.names.insert(namespaces.begin(), namespaces.end());
  native.version.fetch_add(1, std::memory_order_release);
}

namespace {

// Every op that has no neuron kernel and no route of its own. ATen's, and those of PyTorch's own
// namespaces, run natively; other libraries' ops have no NeuronCore kernel on Trainium, and take
// the CPU-fallback tier, as the ATen ops the op policy names do.
void run_unrouted(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!queue::record(op, stack)) {
    HostCall(op, stack, Tier::ByOwner).run();
  }
}

} // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_unrouted>());
}

} // namespace neuron
